// The command-line options every program shares for CURVE security
// (docs/security.md): --curve-secret, --curve-server, --curve-allow. What
// they mean together is read_curve_security's (tensorcom/curve.h).
#pragma once

#include <boost/program_options.hpp>

#include "tensorcom/transport/curve.h"

namespace tensorcom::programs {

using CurveFlags = CurveFiles;

// Adds --curve-secret, --curve-server and --curve-allow, bound to flags.
void add_curve_options(boost::program_options::options_description& options, CurveFlags& flags);

// read_curve_security of the flags.
[[nodiscard]] inline std::optional<CurveSecurity> curve_security(const CurveFlags& flags) {
  return read_curve_security(flags);
}

}  // namespace tensorcom::programs
