#include <doctest/doctest.h>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ordered_jobs.h"

using make_shards::run_in_order;

namespace {

// Items 0 .. count-1, read in order.
auto counting_reader(int count) {
  return [next = 0, count]() mutable -> std::optional<int> {
    if (next == count) return std::nullopt;
    return next++;
  };
}

}  // namespace

TEST_CASE("items are written in read order whatever the threads") {
  for (unsigned jobs : {1u, 2u, 4u, 7u}) {
    CAPTURE(jobs);
    std::vector<int> written;
    std::atomic<int> prepared{0};
    run_in_order<int>(
        jobs, counting_reader(500),
        [&](int& item) {
          if (item % 7 == 0) std::this_thread::yield();  // finish out of order
          item *= 2;
          ++prepared;
        },
        [&](const int& item) { written.push_back(item); });
    REQUIRE(written.size() == 500);
    CHECK(prepared == 500);
    for (int i = 0; i < 500; ++i) CHECK(written[static_cast<std::size_t>(i)] == 2 * i);
  }
}

TEST_CASE("a failure is rethrown after every item before it was written") {
  std::vector<int> written;
  auto run = [&] {
    run_in_order<int>(
        3, counting_reader(200),
        [](int& item) {
          if (item == 100 || item == 150) throw std::runtime_error("item " + std::to_string(item));
        },
        [&](const int& item) { written.push_back(item); });
  };
  CHECK_THROWS_WITH(run(), "item 100");
  REQUIRE(written.size() == 100);
  CHECK(written.back() == 99);
}

TEST_CASE("a read failure comes after the items read before it") {
  std::vector<int> written;
  int next = 0;
  auto read = [&]() -> std::optional<int> {
    if (next == 70) throw std::runtime_error("unreadable");
    return next++;
  };
  CHECK_THROWS_WITH(run_in_order<int>(
                        2, read, [](int&) {}, [&](const int& item) { written.push_back(item); }),
                    "unreadable");
  CHECK(written.size() == 70);
}

TEST_CASE("no items, no calls") {
  int calls = 0;
  run_in_order<int>(
      4, counting_reader(0), [&](int&) { ++calls; }, [&](const int&) { ++calls; });
  CHECK(calls == 0);
}
