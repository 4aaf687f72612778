// ParallelCopy (libtensorcom/src/gpu/parallel_copy.h): the GPU feeder's
// staging memcpy split over threads. Its copies must equal memcpy's for
// every size around the split and part boundaries, job after job.
#include "parallel_copy.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

using tensorcom::detail::ParallelCopy;

namespace {

std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> bytes(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return bytes;
}

// Copies `n` bytes to an offset of a guarded buffer and checks the copy and
// that nothing around it was written.
void check_copy(ParallelCopy& copier, std::size_t n, std::size_t offset, std::uint32_t seed) {
  const auto src = pattern(n + 3, seed);
  std::vector<std::byte> dst(n + offset + 128, std::byte{0xee});
  copier.copy(dst.data() + offset, src.data() + 3, n);
  CHECK(std::memcmp(dst.data() + offset, src.data() + 3, n) == 0);
  for (std::size_t i = 0; i < offset; ++i) REQUIRE(dst[i] == std::byte{0xee});
  for (std::size_t i = offset + n; i < dst.size(); ++i) REQUIRE(dst[i] == std::byte{0xee});
}

}  // namespace

TEST_CASE("copies equal memcpy's with any number of threads") {
  const std::size_t big = ParallelCopy::kSmallestSplit;
  for (std::size_t threads : {0, 1, 2, 3, 4, 7, 8}) {
    CAPTURE(threads);
    ParallelCopy copier(threads);
    CHECK(copier.threads() == (threads == 0 ? 1 : threads));
    std::uint32_t seed = 0;
    for (std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{4095}, big - 1, big, big + 1, 3 * big + 17, 8 * big + 63}) {
      CAPTURE(n);
      check_copy(copier, n, 5, ++seed);
    }
  }
}

TEST_CASE("one copier serves job after job, and is destroyed idle or fresh") {
  { ParallelCopy unused(4); }
  ParallelCopy copier(4);
  for (std::uint32_t job = 0; job < 200; ++job) {
    CAPTURE(job);
    check_copy(copier, ParallelCopy::kSmallestSplit + job * 4099, job % 64, job);
  }
}
