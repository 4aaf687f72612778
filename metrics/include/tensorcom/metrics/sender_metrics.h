// The sending side's metrics, common to every server: samples, batches and
// bytes sent, seconds blocked sending, subscribers. The sending thread
// records; a scrape reads (relaxed atomics: each value is read whole, and
// values read together may be a batch apart).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "tensorcom/metrics/metrics.h"

namespace tensorcom::metrics {

// Seconds one stage of a server spent, for tensorcom_server_stage_seconds_total.
struct StageSeconds {
  std::string_view stage;  // "read", "decode", ...
  double seconds;
};

class SenderMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  // One batch handed to the transport. Sending thread only.
  void sent(std::uint64_t samples, std::uint64_t bytes) noexcept;
  // Time spent waiting for a subscriber or for room to send.
  void add_send_blocked(Clock::duration waited) noexcept;
  // PUB: subscriptions held now (Connection::subscribers()).
  void set_subscribers(std::uint64_t subscribers) noexcept;

  [[nodiscard]] std::uint64_t batches() const noexcept { return batches_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t samples() const noexcept { return samples_.load(std::memory_order_relaxed); }

  // Writes the tensorcom_server_* families; `stages` join send_blocked in
  // tensorcom_server_stage_seconds_total. Thread-safe.
  void write(MetricsText& out, std::initializer_list<StageSeconds> stages = {}) const;

 private:
  std::atomic<std::uint64_t> batches_{0};
  std::atomic<std::uint64_t> samples_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<Clock::rep> send_blocked_{0};
  std::atomic<std::uint64_t> subscribers_{0};
};

// Seconds in a duration count, for stage clocks kept as Clock::rep.
[[nodiscard]] inline double seconds_of(std::chrono::steady_clock::rep ticks) noexcept {
  return std::chrono::duration<double>(std::chrono::steady_clock::duration(ticks)).count();
}

}  // namespace tensorcom::metrics
