// What every tensorcom command-line program does around its real work: turn
// errors into a one-line message and an exit status.
#pragma once

#include <boost/program_options.hpp>

#include <exception>
#include <iostream>

#include "tensorcom/error.h"

// Runs body; tensorcom errors exit 1 and usage errors exit 2, each with
// "NAME: message" on stderr.
template <class Body>
int tool_main(const char* name, Body&& body) {
  try {
    return body();
  } catch (const boost::program_options::error& e) {
    std::cerr << name << ": " << e.what() << " (see --help)\n";
    return 2;
  } catch (const tensorcom::Error& e) {
    std::cerr << name << ": " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << name << ": unexpected error: " << e.what() << '\n';
    return 1;
  }
}

// Prints the options; returns 0 when help was asked for, else 2 (missing arguments).
inline int print_usage(const boost::program_options::options_description& options, bool asked) {
  (asked ? std::cout : std::cerr) << options;
  return asked ? 0 : 2;
}
