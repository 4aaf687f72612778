// The augmentation policies' C++ side: arguments refused by name, draws
// that stay within their ranges and repeat with their generator, every
// operation on the smallest and thinnest images (the pixels themselves are
// compared with torchvision and Pillow in tests/bindings), and the erasing
// box inside the image.
#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "tensorcom/codec/error.h"
#include "tensorcom/imaging/auto_augment.h"
#include "tensorcom/imaging/color_jitter.h"
#include "tensorcom/imaging/random_erasing.h"
#include "tensorcom/imaging/sample_rng.h"
#include "tensorcom/imaging/timm_augment.h"

using namespace tensorcom;
using namespace tensorcom::imaging;

namespace {

std::vector<std::uint8_t> ramp(int width, int height) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width) * height * 3);
  std::iota(pixels.begin(), pixels.end(), std::uint8_t{7});
  return pixels;
}

}  // namespace

TEST_CASE("torch's float32 linspace bins, as its CPU kernel computes them") {
  CHECK(torch_linspace_at(0, 32, 31, 15) == 16.0f);
  CHECK(torch_linspace_at(0, 0.99, 31, 19) == 0.62700003f);  // a vector lane: product and sum rounded apart
  CHECK(torch_linspace_at(0, 32, 31, 17) == 18.133333f);     // the scalar tail: a fused multiply-add
  CHECK(torch_linspace_at(255, 0, 31, 30) == 0.0f);
  CHECK(torch_linspace_at(5, 9, 1, 0) == 5.0f);
}

TEST_CASE("policy arguments are refused by name") {
  CHECK_THROWS_WITH_AS((void)parse_policy_kind("autoaug"), doctest::Contains("unknown augmentation policy 'autoaug'"),
                       ArgumentError);
  AutoAugmentOptions ra;
  ra.kind = PolicyKind::kRandAugment;
  ra.magnitude = 31;
  CHECK_THROWS_WITH_AS(AutoAugmentPolicy{ra}, doctest::Contains("magnitude must be from 0 to 30"), ArgumentError);
  CHECK_THROWS_WITH_AS((void)parse_timm_rand_augment("rand-m9-zz4"), doctest::Contains("unknown section 'zz4'"),
                       ArgumentError);
  CHECK_THROWS_WITH_AS((void)parse_timm_rand_augment("rand-w0"), doctest::Contains("weighted op choices"),
                       ArgumentError);
  CHECK_THROWS_WITH_AS((void)color_jitter_from(0.1, 0.1, 0.1, 0.7), doctest::Contains("hue must be at most 0.5"),
                       ArgumentError);
  RandomErasingOptions erasing;
  erasing.scale = {0.5, 0.2};
  CHECK_THROWS_WITH_AS(check_random_erasing(erasing), doctest::Contains("scale must be"), ArgumentError);
}

TEST_CASE("timm strings parse as timm parses them") {
  const TimmRandAugmentOptions o = parse_timm_rand_augment("rand-m7-mstd0.5-inc1-n3-mmax9-p0.8");
  CHECK(o.magnitude == 7);
  CHECK(o.magnitude_std == 0.5);
  CHECK(o.increasing);
  CHECK(o.num_layers == 3);
  CHECK(o.magnitude_max == 9);
  CHECK(o.probability == 0.8);
  CHECK(std::isinf(parse_timm_rand_augment("rand-mstd101").magnitude_std));
  CHECK(parse_timm_rand_augment("rand-m9-inc").increasing == false);  // no digits: skipped, as timm skips it
}

TEST_CASE("every policy's draws repeat with the sample's generator and stay in range") {
  for (const char* name : {"ta_wide", "ra", "imagenet", "rand-m9-mstd0.5-inc1"}) {
    AutoAugmentOptions options;
    options.kind = parse_policy_kind(name);
    options.timm_config = name;
    const AutoAugmentPolicy policy(options);
    for (std::uint64_t n = 0; n < 200; ++n) {
      auto a = sample_rng(3, n), b = sample_rng(3, n);
      const auto first = policy.draw(176, 150, a);
      CHECK(first == policy.draw(176, 150, b));
      CHECK(first.size() <= 3);
      for (const AppliedOp& op : first) {
        CHECK(std::isfinite(op.magnitude));
        if (op.op == AugmentOp::kPosterize) CHECK((op.magnitude >= 0 && op.magnitude <= 8));
        if (op.op == AugmentOp::kSolarize) CHECK((op.magnitude >= 0 && op.magnitude <= 256));
      }
    }
  }
}

TEST_CASE("every operation keeps 1x1, thin and odd images whole") {
  std::vector<std::uint8_t> scratch;
  for (auto [w, h] : {std::pair{1, 1}, std::pair{1, 7}, std::pair{9, 1}, std::pair{2, 3}, std::pair{17, 5}}) {
    for (int op = 0; op <= static_cast<int>(AugmentOp::kTimmSolarizeAdd); ++op) {
      for (double magnitude : {-45.5, -0.3, 0.0, 0.5, 3.0, 90.0, 1e12, -1e300}) {
        for (auto interpolation :
             {PolicyInterpolation::kNearest, PolicyInterpolation::kBilinear, PolicyInterpolation::kBicubic}) {
          auto pixels = ramp(w, h);
          AppliedOp applied{static_cast<AugmentOp>(op), magnitude, interpolation};
          apply_ops({&applied, 1}, {pixels.data(), w, h}, {interpolation, {1, 2, 3}}, scratch);
          CHECK(pixels.size() == static_cast<std::size_t>(w) * h * 3);
        }
      }
    }
  }
}

TEST_CASE("a recorded operation name names its operation and filter") {
  const AppliedOp rotate{AugmentOp::kTimmRotate, 12.5, PolicyInterpolation::kBicubic};
  CHECK(recorded_op_name(rotate) == "timm_rotate:bicubic");
  CHECK(op_from_record("timm_rotate:bicubic", 12.5) == rotate);
  CHECK(op_from_record("ShearX", -0.2).op == AugmentOp::kShearX);
  CHECK_THROWS_AS((void)op_from_record("ShearX:bicubic", 0.1), ArgumentError);
  CHECK_THROWS_AS((void)op_from_record("timm_rotate:lanczos", 0.1), ArgumentError);
  CHECK_THROWS_WITH_AS((void)op_from_record("Swirl", 1), doctest::Contains("no augmentation operation named 'Swirl'"),
                       ArgumentError);
}

TEST_CASE("erasing boxes lie inside the image, or are not drawn") {
  RandomErasingOptions options;
  options.probability = 1.0;
  int drawn = 0;
  for (std::uint64_t n = 0; n < 2000; ++n) {
    auto rng = sample_rng(9, n);
    const int w = 1 + static_cast<int>(n % 50), h = 1 + static_cast<int>(n % 37);
    if (const auto box = draw_erase_box(w, h, options, rng)) {
      ++drawn;
      const auto [top, left, height, width] = *box;
      CHECK((top >= 0 && left >= 0 && height < h && width < w && top + height <= h && left + width <= w));
    }
  }
  CHECK(drawn > 1000);
  options.probability = 0;
  auto rng = sample_rng(1, 1);
  CHECK_FALSE(draw_erase_box(100, 100, options, rng).has_value());
}
