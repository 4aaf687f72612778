// RandomResizedCrop with torchvision's semantics, and the validation crop.
#include <doctest/doctest.h>

#include <cmath>

#include "tensorcom/codec/error.h"
#include "tensorcom/imaging/geometry.h"

using namespace tensorcom::imaging;

TEST_CASE("random resized crop") {
  RandomResizedCropOptions options;
  SUBCASE("boxes lie inside the image, with area and aspect in range") {
    auto rng = std::mt19937_64(7);
    double scale_sum = 0;
    const int n = 2000;
    for (int i = 0; i < n; ++i) {
      PixelBox box = random_resized_crop(500, 375, options, rng);
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
    for (int i = 0; i < 20; ++i)
      CHECK(random_resized_crop(640, 480, options, a) == random_resized_crop(640, 480, options, b));
  }
  SUBCASE("fallback: centre crop clipped to the aspect range") {
    options.attempts = 0;
    auto rng = std::mt19937_64(1);
    CHECK(random_resized_crop(1000, 10, options, rng) == PixelBox{493, 0, 13, 10});
    CHECK(random_resized_crop(10, 1000, options, rng) == PixelBox{0, 493, 10, 13});
    CHECK(random_resized_crop(400, 300, options, rng) == PixelBox{0, 0, 400, 300});
  }
  SUBCASE("a one-pixel image") {
    auto rng = std::mt19937_64(1);
    CHECK(random_resized_crop(1, 1, options, rng) == PixelBox{0, 0, 1, 1});
  }
}

TEST_CASE("Resize as torchvision computes it") {
  SUBCASE("the shorter side, the longer as int(size * long / short)") {
    CHECK(resized_size(500, 375, {.shorter = 256}) == Size{341, 256});
    CHECK(resized_size(375, 500, {.shorter = 256}) == Size{256, 341});
    CHECK(resized_size(100, 100, {.shorter = 256}) == Size{256, 256});
  }
  SUBCASE("max_size bounds the longer side") {
    CHECK(resized_size(1000, 100, {.shorter = 256, .max_size = 512}) == Size{512, 51});
  }
  SUBCASE("an exact size") { CHECK(resized_size(500, 375, {.width = 64, .height = 32}) == Size{64, 32}); }
  SUBCASE("a longer side past an int is refused") {
    CHECK_THROWS_AS((void)resized_size(1 << 28, 1, {.shorter = 256}), tensorcom::ArgumentError);
  }
}

TEST_CASE("CenterCrop rounds half to even, and may lie outside a small image") {
  CHECK(center_crop(341, 256, {224, 224}) == PixelBox{58, 16, 224, 224});  // (341 - 224) / 2 = 58.5
  CHECK(center_crop(343, 256, {224, 224}) == PixelBox{60, 16, 224, 224});  // 59.5
  CHECK(center_crop(100, 100, {224, 224}) == PixelBox{-62, -62, 224, 224});
}

TEST_CASE("validation transform: Resize then CenterCrop, computed once") {
  // 500x375 resized to shorter side 256 is 341x256; its 224 centre covers
  // source columns 85 to 413 and rows 23 to 351.
  const Transform t = resize_center_crop_transform(500, 375, {.shorter = 256}, {224, 224});
  CHECK(t.crop == PixelBox{0, 0, 500, 375});
  CHECK(t.resized == Size{341, 256});
  CHECK(t.window == PixelBox{58, 16, 224, 224});
  CHECK(t.window_inside());
  CHECK(t.source_box() == PixelBox{85, 23, 329, 329});
  CHECK(resize_center_crop_transform(100, 100, {.shorter = 256}, {224, 224}).source_box() == PixelBox{6, 6, 88, 88});
  CHECK(resize_center_crop_transform(1, 1, {.shorter = 256}, {224, 224}).source_box() == PixelBox{0, 0, 1, 1});
  CHECK_FALSE(resize_center_crop_transform(100, 100, {.shorter = 100}, {224, 224}).window_inside());
}

TEST_CASE("training transform: the crop is what the output covers") {
  const Transform t = resized_crop_transform({10, 20, 300, 200}, {224, 160}, true);
  CHECK(t.output() == Size{224, 160});
  CHECK(t.source_box() == PixelBox{10, 20, 300, 200});
  CHECK(t.flip);
  const Transform whole = resize_transform(640, 480, {.shorter = 240});
  CHECK(whole.output() == Size{320, 240});
  CHECK(whole.source_box() == PixelBox{0, 0, 640, 480});
}
