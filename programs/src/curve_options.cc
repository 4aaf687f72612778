#include "tensorcom/programs/curve_options.h"

namespace po = boost::program_options;

namespace tensorcom::programs {

void add_curve_options(po::options_description& options, CurveFlags& flags) {
  options.add_options()("curve-secret", po::value(&flags.secret),
                        "CURVE: this side's secret certificate (NAME_secret from 'tenbin keygen NAME')")(
      "curve-server", po::value(&flags.server),
      "CURVE: the server's public certificate; makes this side a client (default: a server)")(
      "curve-allow", po::value(&flags.allow), "CURVE server: accept only clients whose public certificate is in DIR");
}

std::optional<CurveSecurity> curve_security(const CurveFlags& flags) {
  if (flags.secret.empty() && flags.server.empty() && flags.allow.empty()) return std::nullopt;
  if (flags.secret.empty()) throw ArgumentError("--curve-server and --curve-allow need --curve-secret");
  if (!flags.server.empty() && !flags.allow.empty()) {
    throw ArgumentError("--curve-allow is for a CURVE server; --curve-server makes this side a client");
  }
  CurveSecurity security;
  security.keys = read_curve_secret_certificate(flags.secret);
  if (!flags.server.empty()) security.server_public_key = read_curve_certificate(flags.server).public_key;
  if (!flags.allow.empty()) security.allowed_clients = read_curve_public_keys(flags.allow);
  return security;
}

}  // namespace tensorcom::programs
