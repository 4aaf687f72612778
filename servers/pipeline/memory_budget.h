// How --memory-limit is shared among the parts of a server that hold
// encoded samples, so that together they stay within it. Each part holds
// what its share allows and, past it, at most one more sample (a sample
// larger than a share still passes, alone): the reader's shuffle buffer and
// its two sample windows, the queue to the workers, each shard read ahead,
// and each worker's sample in hand. So no sample may be larger than the
// limit over twice those holders (at least 32), and the shares are what is
// left when each holder has one such sample.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensorcom::pipeline {

struct MemoryBudget {
  std::uint64_t image = 0;       // the largest encoded image served: within --max-image-bytes
  std::uint64_t reader = 0;      // ReaderOptions::memory_limit: shuffle buffer 3/4, each sample window 1/8
  std::uint64_t queue = 0;       // samples waiting for a worker
  std::uint64_t read_ahead = 0;  // remote shards read ahead, in all (0: none read ahead)
};

// limit: --memory-limit; max_image_bytes: --max-image-bytes; read_ahead:
// the shards read ahead (0 when none is remote).
[[nodiscard]] MemoryBudget memory_budget(std::uint64_t limit, std::uint64_t max_image_bytes, std::size_t workers,
                                         std::size_t read_ahead);

}  // namespace tensorcom::pipeline
