#include "tensorcom/metrics/metrics_server.h"

#include <httplib.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "tensorcom/error.h"

namespace tensorcom::metrics {

class MetricsServer::Impl {
 public:
  Impl(const std::string& address, Collect collect) : collect_(std::move(collect)) {
    const HostPort where = parse_host_port(address);
    host_ = where.host;
    // One thread: scrapes are rare, and collect need not be reentrant. One
    // request a connection, and a short read timeout, so that a scraper
    // keeping its connection open (or a client that sends nothing) cannot
    // hold that thread from the others.
    server_.new_task_queue = [] { return new httplib::ThreadPool(1); };
    server_.set_keep_alive_max_count(1);
    // A scraper sends its request at once: a silent connection is dropped
    // after a second (httplib waits keep_alive_timeout for the first byte).
    server_.set_read_timeout(1, 0);
    server_.set_keep_alive_timeout(1);
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
      MetricsText text;
      collect_(text);
      response.set_content(text.text(), kMetricsContentType);
    });
    errno = 0;
    port_ =
        where.port == 0 ? server_.bind_to_any_port(host_) : (server_.bind_to_port(host_, where.port) ? where.port : -1);
    if (port_ < 0) throw TransportError("metrics: cannot listen on " + address, errno);
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      listened_ = true;
    });
    // stop() does nothing to a server that has not started running, and
    // the destructor would then wait forever.
    while (!server_.is_running() && !listened_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  ~Impl() {
    server_.stop();
    thread_.join();
  }

  [[nodiscard]] std::string url() const {
    const bool v6 = host_.find(':') != std::string::npos;
    return "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_) + "/metrics";
  }

 private:
  Collect collect_;
  std::string host_;
  int port_ = -1;
  httplib::Server server_;
  std::atomic<bool> listened_{false};  // listen_after_bind returned
  std::thread thread_;
};

MetricsServer::MetricsServer(const std::string& address, Collect collect)
    : impl_(std::make_unique<Impl>(address, std::move(collect))) {}

MetricsServer::~MetricsServer() = default;

std::string MetricsServer::url() const { return impl_->url(); }

}  // namespace tensorcom::metrics
