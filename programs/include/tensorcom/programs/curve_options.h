// The command-line options every program shares for CURVE security
// (docs/security.md): --curve-secret, --curve-server, --curve-allow.
#pragma once

#include <boost/program_options.hpp>

#include <optional>
#include <string>

#include "tensorcom/curve.h"

namespace tensorcom::programs {

struct CurveFlags {
  std::string secret;  // this side's secret certificate (NAME_secret)
  std::string server;  // the server's public certificate: this side is a CURVE client
  std::string allow;   // a folder of allowed clients' public certificates (CURVE server only)
};

// Adds --curve-secret, --curve-server and --curve-allow, bound to flags.
void add_curve_options(boost::program_options::options_description& options, CurveFlags& flags);

// Returns: nothing when no flag was given; else the keys read from the files.
// Throws: ArgumentError for an incomplete or contradictory set of flags
//   (--curve-server or --curve-allow without --curve-secret, --curve-allow on
//   a client); IoError and FormatError from reading the certificates.
[[nodiscard]] std::optional<CurveSecurity> curve_security(const CurveFlags& flags);

}  // namespace tensorcom::programs
