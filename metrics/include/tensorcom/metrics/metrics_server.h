// Serves a program's metrics over HTTP for Prometheus to scrape:
// GET /metrics answers with the text that `collect` writes (metrics.h).
// The endpoint is meant to be reachable unauthenticated (docs/deploy.md), so
// everything a client can make it hold is bounded (MetricsServerLimits;
// docs/security.md, "The metrics endpoint").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tensorcom/metrics/metrics.h"

namespace tensorcom::metrics {

// What one client, or many, can make the endpoint hold. A scraper sends one
// short request at once and reads a reply of a few KiB, so none of these
// bounds is near what Prometheus needs.
struct MetricsServerLimits {
  // Request line and headers together; a longer head is answered 431 and
  // its connection closed (nginx's and HAProxy's default buffer is 8 KiB).
  std::size_t max_request_bytes = 8192;
  // Connections held at once; also at most a quarter of the process's
  // descriptor limit. A connection past the cap takes the place of the
  // oldest one still sending its request (a real scraper's request comes
  // within milliseconds), so that a flood of idle connections cannot lock
  // scrapers out.
  std::size_t max_connections = 64;
  // From accepting a connection to the end of its request's head, however
  // steadily its bytes come (slowloris).
  std::chrono::milliseconds request_timeout{2000};
  // From the end of the request to the last byte of the reply read.
  std::chrono::milliseconds reply_timeout{5000};
};

class MetricsServer {
 public:
  // Writes the current values; called on the server's one thread, once per
  // scrape, so it must read only what is safe to read from another thread
  // (atomics, or state under the caller's lock).
  using Collect = std::function<void(MetricsText&)>;

  // Listens on `address`, "HOST:PORT" ("[::1]:PORT" for IPv6; port 0: any
  // free port) and answers scrapes on one thread of its own (one poll loop
  // over every connection) until destroyed. Only GET /metrics is answered
  // 200; every reply closes its connection.
  // Throws ArgumentError for an address that is not HOST:PORT or limits of
  // 0, TransportError if it cannot listen there.
  MetricsServer(const std::string& address, Collect collect, const MetricsServerLimits& limits = {});
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  // Stops at once: closes every connection, whatever its clients are doing,
  // after the scrape being collected, if any.
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
