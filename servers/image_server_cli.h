// The command line shared by serve-imagenet-shards and serve-imagenet-dir.
#pragma once

#include <boost/program_options.hpp>

#include <string>
#include <vector>

#include "pipeline/image_server.h"
#include "tensorcom/programs/curve_options.h"

namespace tensorcom::pipeline {

// Options both servers take; the caller adds its source options.
struct ImageServerCli {
  explicit ImageServerCli(const char* program, const char* usage);

  boost::program_options::options_description options;
  // Parses argv; returns false if --help was printed. Installs the frame's
  // stop handlers, which end serving with a summary.
  [[nodiscard]] bool parse(int argc, char** argv);
  [[nodiscard]] const boost::program_options::variables_map& vars() const { return vars_; }
  ImageServerOptions server;

 private:
  // After parsing: the option values checked and turned into `server`.
  void finish();
  void finish_connection();
  void finish_augment();
  void finish_format();
  void check_bounds() const;
  boost::program_options::variables_map vars_;
  std::string layout_ = "BHWC";
  std::string dtype_ = "uint8";
  std::string interpolation_ = "bilinear";
  std::string mean_;
  std::string std_;
  std::int64_t linger_ms_ = 10000;
  programs::CurveFlags curve_;
};

}  // namespace tensorcom::pipeline
