#include "memory_budget.h"

#include <algorithm>

namespace tensorcom::pipeline {

MemoryBudget memory_budget(std::uint64_t limit, std::uint64_t max_image_bytes, std::size_t workers,
                           std::size_t read_ahead) {
  // The shuffle buffer, two sample windows, the queue, the sample being read.
  constexpr std::uint64_t kFixedHolders = 5;
  const std::uint64_t holders = kFixedHolders + read_ahead + std::max<std::size_t>(workers, 1);
  MemoryBudget b;
  b.image = std::max<std::uint64_t>(std::min(max_image_bytes, limit / std::max<std::uint64_t>(32, 2 * holders)), 1);
  const std::uint64_t shares = limit - std::min(limit, holders * b.image);  // at least half the limit
  b.read_ahead = read_ahead > 0 ? shares / 8 : 0;
  b.queue = shares / 16;
  b.reader = shares - b.read_ahead - b.queue;
  return b;
}

}  // namespace tensorcom::pipeline
