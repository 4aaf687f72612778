// The receiving side's metrics (batches, samples and bytes received,
// malformed messages by kind, seconds blocked waiting for data), taken from
// a receiving Connection's counts and written for a scrape.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "tensorcom/transport/connection.h"
#include "tensorcom/metrics/metrics.h"

namespace tensorcom::metrics {

class ReceiverMetrics {
 public:
  // Copies the connection's counts. Call on the connection's thread (a
  // Connection is one thread's), after receiving; cheap (a few stores).
  void update(const Connection& connection) noexcept;
  // Writes the last update's values as tensorcom_receiver_* families.
  // Thread-safe with update().
  void write(MetricsText& out) const;

 private:
  static constexpr std::size_t kKinds = static_cast<std::size_t>(FormatErrorKind::kOther) + 1;
  std::atomic<std::uint64_t> batches_{0};
  std::atomic<std::uint64_t> samples_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<double> blocked_seconds_{0};
  std::array<std::atomic<std::uint64_t>, kKinds> malformed_{};
};

}  // namespace tensorcom::metrics
