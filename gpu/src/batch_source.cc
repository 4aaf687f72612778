// Batch sources and the GpuFeeder constructors that build them from
// Connections: no CUDA here, so both builds share them.
#include <chrono>

#include "tensorcom/transport/brace.h"
#include "tensorcom/gpu/gpu_feeder.h"

namespace tensorcom {

namespace {

class ConnectionSource final : public BatchSource {
 public:
  explicit ConnectionSource(Connection connection)
      : connection_(std::move(connection)), last_batch_(std::chrono::steady_clock::now()) {}

  std::optional<TensorList> next(Milliseconds wait) override {
    const auto& options = connection_.options();
    if (options.timeout) {
      // Wait no further than the silence limit, so that it is noticed on time.
      auto left =
          std::chrono::duration_cast<Milliseconds>(last_batch_ + *options.timeout - std::chrono::steady_clock::now());
      wait = std::max(Milliseconds(0), std::min(wait, left));
    }
    auto batch = connection_.recv(wait);
    auto now = std::chrono::steady_clock::now();
    if (batch) {
      ++received_;
      last_batch_ = now;
    } else if (options.timeout && now - last_batch_ >= *options.timeout) {
      throw TimeoutError("no batch for " + std::to_string(options.timeout->count()) + " ms from " +
                         connection_.describe());
    }
    return batch;
  }

  bool ended() const override { return connection_.options().total >= 0 && received_ >= connection_.options().total; }

 private:
  Connection connection_;
  std::int64_t received_ = 0;
  std::chrono::steady_clock::time_point last_batch_;
};

std::vector<std::unique_ptr<BatchSource>> sources_of(std::vector<Connection> connections) {
  std::vector<std::unique_ptr<BatchSource>> sources;
  for (Connection& c : connections) sources.push_back(connection_source(std::move(c)));
  return sources;
}

std::vector<std::unique_ptr<BatchSource>> one_source(Connection connection) {
  std::vector<std::unique_ptr<BatchSource>> sources;
  sources.push_back(connection_source(std::move(connection)));
  return sources;
}

}  // namespace

std::unique_ptr<BatchSource> connection_source(Connection connection) {
  return std::make_unique<ConnectionSource>(std::move(connection));
}

GpuFeeder::GpuFeeder(Connection connection, GpuFeederOptions options)
    : GpuFeeder(one_source(std::move(connection)), std::move(options)) {}

GpuFeeder::GpuFeeder(std::vector<Connection> connections, GpuFeederOptions options)
    : GpuFeeder(sources_of(std::move(connections)), std::move(options)) {}

GpuFeeder GpuFeeder::from_urls(std::span<const std::string> urls, ConnectionOptions connection_options,
                               GpuFeederOptions options) {
  (void)gpu_device_count();  // UnavailableError before any socket is bound
  std::vector<std::string> expanded = brace_expand_all(urls);
  if (expanded.size() == options.devices.size() && expanded.size() > 1) {
    std::vector<Connection> connections;
    for (const std::string& url : expanded)
      connections.emplace_back(std::span<const std::string>(&url, 1), connection_options);
    return GpuFeeder(std::move(connections), std::move(options));
  }
  return GpuFeeder(Connection(std::span<const std::string>(expanded), std::move(connection_options)),
                   std::move(options));
}

}  // namespace tensorcom
