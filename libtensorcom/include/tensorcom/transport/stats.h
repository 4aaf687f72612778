// Running statistics of a stream of batches, over the whole run and over a
// horizon of recent batches, in the reference's words.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace tensorcom {

class Statistics {
 public:
  using Clock = std::chrono::steady_clock;

  // One recent batch: when it was recorded, its samples and bytes.
  struct Entry {
    Clock::time_point time;
    std::uint64_t samples;
    std::uint64_t bytes;
  };

  // horizon: how many recent batches the recent rates cover. The clock of
  // started() starts now.
  explicit Statistics(std::size_t horizon = 1000, Clock::time_point now = Clock::now())
      : horizon_(horizon), started_(now) {}

  // Records one batch of `samples` samples and `bytes` bytes, now.
  void add(std::uint64_t samples, std::uint64_t bytes, Clock::time_point now = Clock::now());
  // Records time a receiver spent waiting for a batch (a trainer starved of
  // data); not a batch.
  void add_blocked(Clock::duration waited) noexcept { blocked_ += waited; }
  // Forgets everything; started() becomes now.
  void reset(Clock::time_point now = Clock::now());

  [[nodiscard]] std::uint64_t batches() const noexcept { return batches_; }
  [[nodiscard]] std::uint64_t samples() const noexcept { return samples_; }
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }
  // Seconds from the first batch to the last.
  [[nodiscard]] double seconds() const noexcept;
  // When counting started (construction or reset) and the last batch (the
  // start while there is none): the reference's rate() spans the two.
  [[nodiscard]] Clock::time_point started() const noexcept { return started_; }
  [[nodiscard]] Clock::time_point last() const noexcept { return batches_ == 0 ? started_ : last_; }
  // Seconds spent blocked in receive (add_blocked), since started().
  [[nodiscard]] double blocked_seconds() const noexcept { return std::chrono::duration<double>(blocked_).count(); }
  [[nodiscard]] std::size_t horizon() const noexcept { return horizon_; }
  // The recent horizon's batches, oldest first.
  [[nodiscard]] const std::deque<Entry>& recent() const noexcept { return recent_; }

  // Rates over the recent horizon (0 until two batches were seen).
  [[nodiscard]] double recent_batches_per_second() const noexcept;
  [[nodiscard]] double recent_samples_per_second() const noexcept;
  [[nodiscard]] double recent_bytes_per_second() const noexcept;

  // "rate 12.345678 msg/s throughput 4.62e+08 bytes/s samples 3160.5/s", as
  // the reference prints it, with samples/s added. The rates are the recent
  // horizon's once it spans half a second, before that those since
  // started(), and zero while that too is shorter: a burst of queued batches
  // is not a rate.
  [[nodiscard]] std::string summary() const;

 private:
  [[nodiscard]] double recent_span() const noexcept;

  std::size_t horizon_;
  std::deque<Entry> recent_;
  std::uint64_t recent_samples_ = 0;
  std::uint64_t recent_bytes_ = 0;
  std::uint64_t batches_ = 0;
  std::uint64_t samples_ = 0;
  std::uint64_t bytes_ = 0;
  Clock::time_point started_;
  Clock::time_point first_{};
  Clock::time_point last_{};
  Clock::duration blocked_{};
};

}  // namespace tensorcom
