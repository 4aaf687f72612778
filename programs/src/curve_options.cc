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

}  // namespace tensorcom::programs
