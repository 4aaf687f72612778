// Running statistics over a horizon.
#include <doctest/doctest.h>

#include "tensorcom/stats.h"

using namespace tensorcom;
using namespace std::chrono_literals;

TEST_CASE("statistics") {
  Statistics stats(3);
  auto t0 = Statistics::Clock::time_point{} + 100s;
  SUBCASE("nothing yet") {
    CHECK(stats.recent_batches_per_second() == 0);
    CHECK(stats.summary().find("rate 0.000000 msg/s") == 0);
  }
  SUBCASE("rates over the horizon") {
    for (int i = 0; i < 5; ++i) stats.add(10, 1000, t0 + i * 500ms);
    CHECK(stats.batches() == 5);
    CHECK(stats.samples() == 50);
    CHECK(stats.bytes() == 5000);
    CHECK(stats.seconds() == doctest::Approx(2.0));
    // The horizon holds the last 3 batches, 1 s apart end to end.
    CHECK(stats.recent_batches_per_second() == doctest::Approx(2.0));
    CHECK(stats.recent_samples_per_second() == doctest::Approx(20.0));
    CHECK(stats.recent_bytes_per_second() == doctest::Approx(2000.0));
    CHECK(stats.summary() == "rate 2.000000 msg/s throughput 2.00e+03 bytes/s samples 20.0/s");
  }
  SUBCASE("reset") {
    stats.add(1, 1, t0);
    stats.reset();
    CHECK(stats.batches() == 0);
  }
}
