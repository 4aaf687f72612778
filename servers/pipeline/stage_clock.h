// Time spent in the servers' stages (reading, decoding, augmenting), for
// their metrics: each thread adds only to its own clocks, which scrapes read.
#pragma once

#include <atomic>
#include <chrono>

namespace tensorcom::pipeline {

// One thread's time in one stage, on a cache line of its own: timing a
// sample costs two clock reads and an uncontended relaxed add, no lock.
struct alignas(64) StageClock {
  using Clock = std::chrono::steady_clock;
  std::atomic<Clock::rep> ticks{0};
  void add(Clock::duration spent) noexcept { ticks.fetch_add(spent.count(), std::memory_order_relaxed); }
  [[nodiscard]] Clock::rep read() const noexcept { return ticks.load(std::memory_order_relaxed); }
};

// A worker's two stages.
struct WorkerClocks {
  StageClock decode;
  StageClock augment;  // crop, resize, flip and conversion into the batch
};

}  // namespace tensorcom::pipeline
