#include "parallel_copy.h"

#include <algorithm>
#include <cstring>

namespace tensorcom::detail {

namespace {
constexpr std::size_t kCacheLine = 64;  // parts start on cache lines, so no two threads write one
}

ParallelCopy::ParallelCopy(std::size_t threads) {
  for (std::size_t part = 1; part < threads; ++part) helpers_.emplace_back([this, part] { help(part); });
}

ParallelCopy::~ParallelCopy() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  posted_.notify_all();
  for (auto& helper : helpers_) helper.join();
}

void ParallelCopy::copy(std::byte* dst, const std::byte* src, std::size_t n) {
  if (helpers_.empty() || n < kSmallestSplit) {
    if (n != 0) std::memcpy(dst, src, n);
    return;
  }
  const std::size_t share = (n + threads() - 1) / threads();
  Job job{dst, src, n, (share + kCacheLine - 1) / kCacheLine * kCacheLine};
  {
    std::lock_guard lock(mutex_);
    job_ = job;
    unfinished_ = helpers_.size();
    ++generation_;
  }
  posted_.notify_all();
  copy_part(job, 0);
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [&] { return unfinished_ == 0; });
}

void ParallelCopy::copy_part(const Job& job, std::size_t part) noexcept {
  const std::size_t begin = std::min(job.n, part * job.part_bytes);
  const std::size_t end = std::min(job.n, begin + job.part_bytes);
  if (end > begin) std::memcpy(job.dst + begin, job.src + begin, end - begin);
}

// A helper copies part `part` of every job. copy() waits for all helpers
// before it posts the next job, so none can miss one.
void ParallelCopy::help(std::size_t part) {
  std::uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    posted_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const Job job = job_;
    lock.unlock();
    copy_part(job, part);
    lock.lock();
    if (--unfinished_ == 0) finished_.notify_one();
  }
}

std::size_t default_staging_threads() noexcept {
  const std::size_t cpus = std::thread::hardware_concurrency();
  return std::clamp<std::size_t>(cpus / 2, 1, 8);
}

}  // namespace tensorcom::detail
