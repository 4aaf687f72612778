#include "tensorcom/metrics/sender_metrics.h"

namespace tensorcom::metrics {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
}  // namespace

void SenderMetrics::sent(std::uint64_t samples, std::uint64_t bytes) noexcept {
  batches_.fetch_add(1, kRelaxed);
  samples_.fetch_add(samples, kRelaxed);
  bytes_.fetch_add(bytes, kRelaxed);
}

void SenderMetrics::add_send_blocked(Clock::duration waited) noexcept {
  send_blocked_.fetch_add(waited.count(), kRelaxed);
}

void SenderMetrics::set_subscribers(std::uint64_t subscribers) noexcept { subscribers_.store(subscribers, kRelaxed); }

void SenderMetrics::write(MetricsText& out, std::initializer_list<StageSeconds> stages) const {
  out.counter("tensorcom_server_samples_total", "Samples sent.", samples());
  out.counter("tensorcom_server_batches_total", "Batches sent.", batches());
  out.counter("tensorcom_server_sent_bytes_total", "Payload bytes of the batches sent.", bytes_.load(kRelaxed));
  out.gauge("tensorcom_server_subscribers", "Subscriptions held by peers now (PUB; 0 for PUSH).",
            static_cast<double>(subscribers_.load(kRelaxed)));
  out.family("tensorcom_server_stage_seconds_total", MetricType::kCounter,
             "Seconds spent per stage, summed over the threads doing it: read (reading shards), decode, "
             "augment (crop, resize, flip, convert), send_blocked (waiting for a subscriber or for room to send).");
  for (const StageSeconds& stage : stages) out.sample(stage.seconds, {{"stage", stage.stage}});
  out.sample(seconds_of(send_blocked_.load(kRelaxed)), {{"stage", "send_blocked"}});
}

}  // namespace tensorcom::metrics
