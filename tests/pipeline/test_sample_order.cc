// Epoch orders, rank splits, resampling, the shuffle buffer and epoch quotas.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <utility>

#include "sample_order.h"

using namespace tensorcom::pipeline;

TEST_CASE("epoch units") {
  OrderOptions o;
  o.seed = 5;
  SUBCASE("every unit once, in a different order each epoch") {
    auto e0 = epoch_units(100, 0, o), e1 = epoch_units(100, 1, o);
    auto s0 = e0, s1 = e1;
    std::sort(s0.begin(), s0.end());
    std::sort(s1.begin(), s1.end());
    for (std::size_t i = 0; i < 100; ++i) REQUIRE(s0[i] == i);
    CHECK(s0 == s1);
    CHECK(e0 != e1);
    CHECK(epoch_units(100, 0, o) == e0);
  }
  SUBCASE("no shuffling keeps the given order") {
    o.shuffle_units = false;
    CHECK(epoch_units(4, 3, o) == std::vector<std::size_t>{0, 1, 2, 3});
  }
  SUBCASE("ranks split the units without overlap") {
    o.world = 3;
    std::multiset<std::size_t> all;
    for (std::size_t rank = 0; rank < 3; ++rank) {
      o.rank = rank;
      for (std::size_t u : epoch_units(10, 2, o)) all.insert(u);
    }
    CHECK(all.size() == 10);
    CHECK(std::set<std::size_t>(all.begin(), all.end()).size() == 10);
  }
  SUBCASE("repeats list each unit K times in a row, then deal them as RASampler deals indices") {
    o.shuffle_units = false;
    o.repeats = 3;
    o.world = 2;
    // [0 0 0 1 1 1 2 2 2 3 3 3] dealt to two ranks.
    o.rank = 0;
    CHECK(epoch_units(4, 0, o) == std::vector<std::size_t>{0, 0, 1, 2, 2, 3});
    o.rank = 1;
    CHECK(epoch_units(4, 0, o) == std::vector<std::size_t>{0, 1, 1, 2, 3, 3});
    o.world = 1;
    o.rank = 0;
    CHECK(epoch_units(2, 0, o) == std::vector<std::size_t>{0, 0, 0, 1, 1, 1});
  }
  SUBCASE("with as many ranks as repeats, every rank reads the same units, each once") {
    o.repeats = 4;
    o.world = 4;
    std::vector<std::vector<std::size_t>> lists;
    for (std::size_t rank = 0; rank < 4; ++rank) {
      o.rank = rank;
      lists.push_back(epoch_units(10, 1, o));
    }
    for (const auto& list : lists) CHECK(list == lists[0]);
    CHECK(std::set<std::size_t>(lists[0].begin(), lists[0].end()).size() == 10);
  }
  SUBCASE("resampling draws with replacement") {
    o.with_replacement = true;
    auto drawn = epoch_units(50, 0, o);
    CHECK(drawn.size() == 50);
    CHECK(std::set<std::size_t>(drawn.begin(), drawn.end()).size() < 50);
    CHECK(std::all_of(drawn.begin(), drawn.end(), [](std::size_t u) { return u < 50; }));
  }
}

TEST_CASE("sample generators") {
  // Deterministic, and a stream of its own for every sample and seed: the
  // first draws of 20,000 generators (two seeds, consecutive sequences)
  // never repeat, and their coin flips are fair.
  CHECK(sample_rng(7, 123)() == sample_rng(7, 123)());
  std::set<std::uint64_t> firsts;
  int heads = 0;
  for (std::uint64_t seed : {0, 1}) {
    for (std::uint64_t sequence = 0; sequence < 10000; ++sequence) {
      auto rng = sample_rng(seed, sequence);
      firsts.insert(rng());
      heads += std::uniform_real_distribution<double>(0, 1)(rng) < 0.5;
    }
  }
  CHECK(firsts.size() == 20000);
  CHECK(heads > 9700);  // 10,000 +- 3 standard deviations (71)
  CHECK(heads < 10300);
}

TEST_CASE("shuffle buffer") {
  ShuffleBuffer<int> buffer(10, std::mt19937_64(1));
  std::vector<int> out;
  for (int i = 0; i < 100; ++i) {
    if (auto x = buffer.add(i)) out.push_back(*x);
  }
  CHECK(out.size() == 90);
  while (auto x = buffer.drain()) out.push_back(*x);
  std::vector<int> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 100; ++i) REQUIRE(sorted[i] == i);
  CHECK(out != sorted);
  SUBCASE("a byte bound makes the buffer pass samples on early") {
    ShuffleBuffer<int> bounded(1000, std::mt19937_64(2), 100, [](const int& bytes) { return std::size_t(bytes); });
    int held = 0;
    for (int i = 1; i <= 30; ++i) {
      CHECK_FALSE(bounded.add(i).has_value());  // far below the count
      held += i;
      while (auto x = bounded.take_excess()) held -= *x;
      CHECK(held <= 100);
    }
    CHECK(held > 70);  // it passes on only what it must (the heaviest sample is 30)
  }
  SUBCASE("capacity 0 passes samples straight through") {
    ShuffleBuffer<int> none(0, std::mt19937_64(1));
    CHECK(none.add(4) == 4);
    CHECK_FALSE(none.drain().has_value());
  }
}

// Reads a share of `share` samples as the server does, pass after pass.
static std::pair<std::uint64_t, std::size_t> fill(EpochQuota& quota, std::uint64_t share) {
  std::size_t passes = 0;
  for (bool again = true; again; ++passes) {
    const std::uint64_t before = quota.taken();
    for (std::uint64_t i = 0; i < share && quota.take(); ++i) {
    }
    again = quota.another_pass(before);
  }
  return {quota.taken(), passes};
}

TEST_CASE("epoch quota") {
  SUBCASE("0 takes the share as it is") {
    EpochQuota quota(0);
    CHECK(fill(quota, 37) == std::pair<std::uint64_t, std::size_t>{37, 1});
    CHECK_FALSE(quota.cut());
  }
  SUBCASE("a larger share is cut to the quota") {
    EpochQuota quota(32);
    CHECK(fill(quota, 37) == std::pair<std::uint64_t, std::size_t>{32, 1});
    CHECK(quota.cut());
  }
  SUBCASE("a share of exactly the quota is neither cut nor repeated") {
    EpochQuota quota(32);
    CHECK(fill(quota, 32) == std::pair<std::uint64_t, std::size_t>{32, 1});
    CHECK_FALSE(quota.cut());
  }
  SUBCASE("a smaller share is read again until the quota is met") {
    EpochQuota quota(32);
    CHECK(fill(quota, 10) == std::pair<std::uint64_t, std::size_t>{32, 4});
  }
  SUBCASE("an empty share is not read forever") {
    EpochQuota quota(32);
    CHECK(fill(quota, 0) == std::pair<std::uint64_t, std::size_t>{0, 1});
  }
}
