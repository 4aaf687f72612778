// Running statistics over a horizon.
#include <doctest/doctest.h>

#include "tensorcom/transport/stats.h"

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
  SUBCASE("a burst of queued batches is not a rate") {
    Statistics s(1000, t0);
    for (int i = 0; i < 10; ++i) s.add(10, 1000, t0 + 1ms + i * 5us);
    // 45 us between the first and the last, 1 ms since the start: too short.
    CHECK(s.summary() == "rate 0.000000 msg/s throughput 0.00e+00 bytes/s samples 0.0/s");
    // The same burst a second after the start: every batch over that second.
    Statistics later(1000, t0);
    for (int i = 0; i < 10; ++i) later.add(10, 1000, t0 + 1s + i * 5us);
    CHECK(later.summary().find("rate 9.99") == 0);
    CHECK(later.recent_batches_per_second() > 100000);  // the horizon's own rate is left as it is
  }
  SUBCASE("reset") {
    stats.add(1, 1, t0);
    stats.add_blocked(2s);
    stats.reset(t0 + 5s);
    CHECK(stats.batches() == 0);
    CHECK(stats.blocked_seconds() == 0);
    CHECK(stats.started() == t0 + 5s);
    CHECK(stats.last() == t0 + 5s);  // the start while there is no batch
  }
  SUBCASE("the start, the last batch, time blocked and the recent entries") {
    Statistics s(2, t0);
    s.add(1, 10, t0 + 1s);
    s.add(1, 20, t0 + 2s);
    s.add(1, 30, t0 + 3s);
    s.add_blocked(1500ms);
    CHECK(s.started() == t0);
    CHECK(s.last() == t0 + 3s);
    CHECK(s.blocked_seconds() == doctest::Approx(1.5));
    CHECK(s.horizon() == 2);
    REQUIRE(s.recent().size() == 2);
    CHECK(s.recent().front().bytes == 20);
  }
}
