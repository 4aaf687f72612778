// RandomResizedCrop with torchvision's semantics, and the validation crop.
#include <doctest/doctest.h>

#include <cmath>

#include "crop.h"

using namespace tensorcom::pipeline;

TEST_CASE("random resized crop") {
  RandomResizedCropOptions options;
  SUBCASE("boxes lie inside the image, with area and aspect in range") {
    auto rng = std::mt19937_64(7);
    double scale_sum = 0;
    const int n = 2000;
    for (int i = 0; i < n; ++i) {
      CropBox box = random_resized_crop(500, 375, options, rng);
      REQUIRE(box.x >= 0);
      REQUIRE(box.y >= 0);
      REQUIRE(box.x + box.width <= 500);
      REQUIRE(box.y + box.height <= 375);
      double scale = static_cast<double>(box.width) * box.height / (500.0 * 375.0);
      double ratio = static_cast<double>(box.width) / box.height;
      // Rounding to whole pixels moves both a little past the drawn range.
      CHECK(scale >= 0.07);
      CHECK(ratio >= 0.74);
      CHECK(ratio <= 1.35);
      scale_sum += scale;
    }
    // Area fractions are uniform on (0.08, 1) except where the box does not fit.
    CHECK(scale_sum / n > 0.40);
    CHECK(scale_sum / n < 0.56);
  }
  SUBCASE("the same seed gives the same boxes") {
    auto a = std::mt19937_64(3), b = std::mt19937_64(3);
    for (int i = 0; i < 20; ++i) CHECK(random_resized_crop(640, 480, options, a) == random_resized_crop(640, 480, options, b));
  }
  SUBCASE("fallback: centre crop clipped to the aspect range") {
    options.attempts = 0;
    auto rng = std::mt19937_64(1);
    CHECK(random_resized_crop(1000, 10, options, rng) == CropBox{493, 0, 13, 10});
    CHECK(random_resized_crop(10, 1000, options, rng) == CropBox{0, 493, 10, 13});
    CHECK(random_resized_crop(400, 300, options, rng) == CropBox{0, 0, 400, 300});
  }
  SUBCASE("a one-pixel image") {
    auto rng = std::mt19937_64(1);
    CHECK(random_resized_crop(1, 1, options, rng) == CropBox{0, 0, 1, 1});
  }
}

TEST_CASE("validation crop") {
  // 500x375 resized to shorter side 256 is 341x256; its 224 centre is 328 source pixels.
  CHECK(center_crop_after_resize(500, 375, 256, 224) == CropBox{86, 23, 328, 328});
  CHECK(center_crop_after_resize(100, 100, 256, 224) == CropBox{6, 6, 88, 88});
  CHECK(center_crop_after_resize(1, 1, 256, 224) == CropBox{0, 0, 1, 1});
}
