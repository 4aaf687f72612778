// The frame every tensorcom command-line program (servers and tools) runs
// in: errors turned into a one-line message and an exit status, usage
// printing, stop signals, and the address the reference's programs meet at
// when given none.
#pragma once

#include <boost/program_options.hpp>

#include <chrono>
#include <exception>
#include <iostream>
#include <span>
#include <string>

#include "tensorcom/codec/error.h"

namespace tensorcom::programs {

// Where the reference's servers publish and its tools listen by default.
inline constexpr const char* kDefaultServeUrl = "zpub://127.0.0.1:7880";
inline constexpr const char* kDefaultReceiveUrl = "zsub://127.0.0.1:7880";

// Exit statuses beyond 0, 1 (error) and 2 (usage).
inline constexpr int kExitInterrupted = 130;  // SIGINT or SIGTERM, as a shell reports it

// The seconds an option gives (name, as "--delivery-timeout", for the
// message), as milliseconds. Throws ArgumentError naming the option unless
// 0 <= seconds <= a week.
[[nodiscard]] std::chrono::milliseconds seconds_option(const char* name, double seconds);

// Raises the soft limit on open files to the hard one (a common soft limit
// is 1024): peers holding connections open must not leave the program
// without descriptors for its own files, as nginx's worker_rlimit_nofile.
void raise_open_file_limit() noexcept;

// Throws ArgumentError naming the first inproc:// URL: a program's sockets
// would wait forever there, since only its own threads could be the peer.
void refuse_inproc(std::span<const std::string> urls, bool expand_braces = true);

// Runs body; tensorcom errors exit 1 and usage errors exit 2, each with
// "NAME: message" on stderr. The open-file limit is raised first.
template <class Body>
int program_main(const char* name, Body&& body) {
  raise_open_file_limit();
  try {
    return body();
  } catch (const boost::program_options::error& e) {
    std::cerr << name << ": " << e.what() << " (see --help)\n";
    return 2;
  } catch (const Error& e) {
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

// Installs SIGINT and SIGTERM handlers that record the signal, so that a
// program can stop cleanly and report what it did. Without SA_RESTART, so
// that a thread blocked in a receive or send returns (EINTR); one-shot
// (SA_RESETHAND), so that a second signal ends a process stuck elsewhere.
// Process-wide: call once, from main's thread, before starting threads.
void install_stop_handlers();

// Whether a stop signal has arrived. Async-signal-safe and thread-safe.
[[nodiscard]] bool stop_requested() noexcept;

}  // namespace tensorcom::programs
