// The shares of --memory-limit: each holder of encoded samples may go one
// image past its share, and all of it together stays within the limit.
#include "memory_budget.h"

#include <doctest/doctest.h>

#include <initializer_list>

using namespace tensorcom::pipeline;

namespace {

// What the server may hold at most: every share full, plus one image more
// for each holder (memory_budget.h lists them).
std::uint64_t most_held(const MemoryBudget& b, std::size_t workers, std::size_t read_ahead) {
  return b.reader + b.queue + b.read_ahead + (5 + workers + read_ahead) * b.image;
}

}  // namespace

TEST_CASE("the shares and one image a holder stay within the limit") {
  for (std::uint64_t limit : {std::uint64_t{64} << 20, std::uint64_t{512} << 20, std::uint64_t{4} << 30}) {
    for (std::size_t workers : {1, 2, 16, 200}) {
      for (std::size_t ahead : {0, 3, 64}) {
        const MemoryBudget b = memory_budget(limit, std::uint64_t{256} << 20, workers, ahead);
        CAPTURE(limit);
        CAPTURE(workers);
        CAPTURE(ahead);
        CHECK(most_held(b, workers, ahead) <= limit);
        CHECK(b.reader >= limit / 4);  // the shuffle buffer keeps most of it
        CHECK(b.image >= 1);
        CHECK((b.read_ahead > 0) == (ahead > 0));
      }
    }
  }
}

TEST_CASE("an image may take a 32nd of the limit, less with many holders, never more than asked") {
  CHECK(memory_budget(std::uint64_t{512} << 20, std::uint64_t{256} << 20, 2, 0).image == std::uint64_t{16} << 20);
  CHECK(memory_budget(std::uint64_t{4} << 30, std::uint64_t{256} << 20, 2, 3).image == std::uint64_t{128} << 20);
  CHECK(memory_budget(std::uint64_t{4} << 30, std::uint64_t{1} << 20, 2, 3).image == std::uint64_t{1} << 20);
  // 5 + 27 workers + 0 read ahead = 32 holders: a 64th each.
  CHECK(memory_budget(std::uint64_t{64} << 20, std::uint64_t{256} << 20, 27, 0).image == std::uint64_t{1} << 20);
}
