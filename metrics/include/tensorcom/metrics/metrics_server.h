// Serves a program's metrics over HTTP for Prometheus to scrape:
// GET /metrics answers with the text that `collect` writes (metrics.h).
// The HTTP library stays in metrics_server.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tensorcom/metrics/metrics.h"

namespace tensorcom::metrics {

class MetricsServer {
 public:
  // Writes the current values; called on the server's one thread, once per
  // scrape, so it must read only what is safe to read from another thread
  // (atomics, or state under the caller's lock).
  using Collect = std::function<void(MetricsText&)>;

  // Listens on `address`, "HOST:PORT" ("[::1]:PORT" for IPv6; port 0: any
  // free port) and answers scrapes on a thread of its own until destroyed.
  // Throws ArgumentError for an address that is not HOST:PORT,
  // TransportError if it cannot listen there, UnavailableError in a build
  // without cpp-httplib.
  MetricsServer(const std::string& address, Collect collect);
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  // Stops listening and waits for a scrape in progress.
  ~MetricsServer();

  // Where to scrape: "http://HOST:PORT/metrics", with the bound port.
  [[nodiscard]] std::string url() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// After a program's work is done: waits `seconds` (or until stop() says
// so, polled every 50 ms), so that a scraper collects the final values
// before the endpoint goes away with the process.
void hold_for_scrapes(double seconds, const std::function<bool()>& stop);

// Splits "HOST:PORT" or "[V6HOST]:PORT". Throws ArgumentError naming the
// address when there is no host or the port is not 0 .. 65535.
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};
[[nodiscard]] HostPort parse_host_port(const std::string& address);

}  // namespace tensorcom::metrics
