// Resolution by epoch: FFCV's ramp and rounding, and the schedules refused.
#include <doctest/doctest.h>

#include <vector>

#include "size_schedule.h"
#include "tensorcom/codec/error.h"

using namespace tensorcom;
using namespace tensorcom::pipeline;

TEST_CASE("size schedule") {
  SUBCASE("the ends hold before and after the ramp, unrounded") {
    const SizeSchedule s = parse_size_schedule("100,200,2,6", 8192);
    CHECK(s.size_at(0) == 100);
    CHECK(s.size_at(2) == 100);
    CHECK(s.size_at(6) == 200);
    CHECK(s.size_at(1000) == 200);
  }
  SUBCASE("between the ends, the nearest multiple of 32") {
    const SizeSchedule s = parse_size_schedule("64,128,1,3", 8192);
    CHECK(s.size_at(0) == 64);
    CHECK(s.size_at(1) == 64);
    CHECK(s.size_at(2) == 96);
    CHECK(s.size_at(3) == 128);
    // FFCV's ImageNet recipe: 160 to 192 over epochs 11 to 13 (of 16).
    const SizeSchedule ffcv = parse_size_schedule("160,192,11,13", 8192);
    CHECK(ffcv.size_at(12) == 192);  // 176 / 32 = 5.5, to even: 6
    // docs/deploy.md's example, epochs 28 to 34 (np.interp and np.round give these).
    const SizeSchedule doc = parse_size_schedule("160,192,28,34", 8192);
    std::vector<int> sizes;
    for (std::uint64_t e = 27; e <= 35; ++e) sizes.push_back(doc.size_at(e));
    CHECK(sizes == std::vector<int>{160, 160, 160, 160, 192, 192, 192, 192, 192});
  }
  SUBCASE("halves round to even, as np.round") {
    const SizeSchedule s = parse_size_schedule("64,128,0,4", 8192);
    CHECK(s.size_at(1) == 64);   // 80 / 32 = 2.5: 2, not 3
    CHECK(s.size_at(2) == 96);   // 3
    CHECK(s.size_at(3) == 128);  // 112 / 32 = 3.5: 4
  }
  SUBCASE("a step when both epochs are one") {
    const SizeSchedule s = parse_size_schedule("128,224,5,5", 8192);
    CHECK(s.size_at(4) == 128);
    CHECK(s.size_at(5) == 128);
    CHECK(s.size_at(6) == 224);
  }
  SUBCASE("largest and smallest include what rounding makes") {
    const SizeSchedule s = parse_size_schedule("90,120,0,8", 8192);
    CHECK(s.size_at(7) == 128);  // 116.25 rounds up past the end size
    CHECK(s.largest() == 128);
    CHECK(s.size_at(1) == 96);
    CHECK(s.smallest() == 90);
  }
  SUBCASE("bad schedules are refused, naming the option") {
    for (const char* bad :
         {"", "160", "160,192,0", "160,192,0,10,3", "160,,0,10", "a,192,0,10", "-1,192,0,10", "160,192,0,1e3",
          "0,192,0,10", "160,9000,0,10", "192,160,0,10", "160,192,10,2", "1,20,0,4", "160,192,0,1000001"}) {
      CAPTURE(bad);
      CHECK_THROWS_WITH_AS((void)parse_size_schedule(bad, 8192), doctest::Contains("--size-schedule"), ArgumentError);
    }
  }
}
