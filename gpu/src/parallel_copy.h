// ParallelCopy: one large memcpy split over several threads.
//
// The GPU feeder stages each received batch into pinned memory before its
// DMA. One thread's memcpy tops out far below what the DMA engines take
// (about 6.5 GB/s of copy against 55 GB/s host-to-device on an H200
// machine's 16-core Xeon), so the staging copy is cut into parts that helper
// threads copy side by side. The calling thread copies the first part itself
// and returns once every part is done.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tensorcom::detail {

class ParallelCopy {
 public:
  // Below this a copy is not split: waking helpers would cost more.
  static constexpr std::size_t kSmallestSplit = 1 << 20;

  // Copies with `threads` threads: the caller and threads - 1 helpers
  // (0 counts as 1).
  explicit ParallelCopy(std::size_t threads);
  ParallelCopy(const ParallelCopy&) = delete;
  ParallelCopy& operator=(const ParallelCopy&) = delete;
  ~ParallelCopy();

  // memcpy(dst, src, n), split over the threads. The ranges must not
  // overlap. One caller at a time.
  void copy(std::byte* dst, const std::byte* src, std::size_t n);

  [[nodiscard]] std::size_t threads() const noexcept { return helpers_.size() + 1; }

 private:
  struct Job {
    std::byte* dst = nullptr;
    const std::byte* src = nullptr;
    std::size_t n = 0;
    std::size_t part_bytes = 0;  // every part but the last
  };
  static void copy_part(const Job& job, std::size_t part) noexcept;
  void help(std::size_t part);

  std::mutex mutex_;
  std::condition_variable posted_;    // a new job, or stopping
  std::condition_variable finished_;  // the helpers' parts are done
  Job job_;
  std::uint64_t generation_ = 0;  // jobs posted so far
  std::size_t unfinished_ = 0;    // helpers still copying the current job
  bool stopping_ = false;
  std::vector<std::thread> helpers_;
};

// The staging threads for GpuFeederOptions::staging_threads == 0: half the
// CPUs, 1 to 8. On the H200 machine 8 threads staged at 0.94x the plain
// pinned copy's rate and 4 at 0.48x (tests/bench/gpu_feed_bandwidth.cc);
// they work only while a batch is copied.
[[nodiscard]] std::size_t default_staging_threads() noexcept;

}  // namespace tensorcom::detail
