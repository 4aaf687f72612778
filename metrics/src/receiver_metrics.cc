#include "tensorcom/metrics/receiver_metrics.h"

#include <string>

namespace tensorcom::metrics {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
}  // namespace

void ReceiverMetrics::update(const Connection& connection) noexcept {
  const Statistics& stats = connection.stats();
  batches_.store(stats.batches(), kRelaxed);
  samples_.store(stats.samples(), kRelaxed);
  bytes_.store(stats.bytes(), kRelaxed);
  blocked_seconds_.store(stats.blocked_seconds(), kRelaxed);
  for (const auto& [kind, count] : connection.malformed().by_kind) {
    const auto index = static_cast<std::size_t>(kind);
    if (index < kKinds) malformed_[index].store(count, kRelaxed);
  }
}

void ReceiverMetrics::write(MetricsText& out) const {
  out.counter("tensorcom_receiver_batches_total", "Batches received.", batches_.load(kRelaxed));
  out.counter("tensorcom_receiver_samples_total", "Samples received (first dimension of each batch's first tensor).",
              samples_.load(kRelaxed));
  out.counter("tensorcom_receiver_received_bytes_total", "Payload bytes of the batches received.",
              bytes_.load(kRelaxed));
  out.counter("tensorcom_receiver_blocked_seconds_total",
              "Seconds spent waiting for a batch: near the elapsed time when the producers are the bottleneck.",
              blocked_seconds_.load(kRelaxed));
  out.family("tensorcom_receiver_malformed_messages_total", MetricType::kCounter,
             "Malformed messages received and skipped, by kind.");
  for (std::size_t index = 0; index < kKinds; ++index) {
    const std::string kind(format_error_kind_name(static_cast<FormatErrorKind>(index)));
    out.sample(malformed_[index].load(kRelaxed), {{"kind", kind}});
  }
}

}  // namespace tensorcom::metrics
