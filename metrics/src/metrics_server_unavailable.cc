// MetricsServer in a build without cpp-httplib: every constructor refuses.
#include "tensorcom/error.h"
#include "tensorcom/metrics/metrics_server.h"

namespace tensorcom::metrics {

class MetricsServer::Impl {};

MetricsServer::MetricsServer(const std::string& address, Collect) {
  (void)parse_host_port(address);  // a bad address is still the user's first problem
  throw UnavailableError("--metrics: this build of tensorcom has no HTTP server (cpp-httplib was not found)");
}

MetricsServer::~MetricsServer() = default;

std::string MetricsServer::url() const { return {}; }

}  // namespace tensorcom::metrics
