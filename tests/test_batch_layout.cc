// The image vocabulary (batch_layout.h): layouts and the channel affine map.
#include "tensorcom/codec/batch_layout.h"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "tensorcom/codec/error.h"

using namespace tensorcom;

TEST_CASE("layout names") {
  for (ImageLayout layout : {ImageLayout::kBHWC, ImageLayout::kBCHW, ImageLayout::kBHW}) {
    CHECK(parse_layout(layout_name(layout)) == layout);
  }
  CHECK(layout_name(ImageLayout::kBCHW) == "BCHW");
  CHECK(parse_layout("bhwc") == ImageLayout::kBHWC);
  CHECK(parse_layout("bhw") == ImageLayout::kBHW);
  CHECK_FALSE(parse_layout("NCHW").has_value());
  CHECK_FALSE(parse_layout("Bchw").has_value());
  CHECK_FALSE(parse_layout("").has_value());
}

TEST_CASE("the channel affine map is (x / 255 - mean) / std") {
  SUBCASE("one value per channel") {
    const std::array<float, 3> mean{0.485f, 0.456f, 0.406f}, std{0.229f, 0.224f, 0.225f};
    const ChannelAffine affine = channel_affine(mean, std, 3);
    for (int c = 0; c < 3; ++c) {
      for (int x : {0, 1, 128, 255}) {
        const double want = (x / 255.0 - mean[c]) / std[c];
        CHECK(x * affine.scale[c] + affine.bias[c] == doctest::Approx(want).epsilon(1e-6));
      }
    }
    CHECK(affine.scale[3] == 0.0f);
    CHECK(affine.bias[3] == 0.0f);
  }
  SUBCASE("one value for every channel") {
    const std::vector<float> mean{0.5f}, std{0.5f};
    const ChannelAffine affine = channel_affine(mean, std, 4);
    for (int c = 0; c < 4; ++c) {
      CHECK(0 * affine.scale[c] + affine.bias[c] == -1.0f);
      CHECK(255 * affine.scale[c] + affine.bias[c] == doctest::Approx(1.0f));
    }
  }
  SUBCASE("identity when mean 0 and std 1: x / 255") {
    const std::vector<float> mean{0.0f}, std{1.0f};
    const ChannelAffine affine = channel_affine(mean, std, 1);
    CHECK(255 * affine.scale[0] + affine.bias[0] == 1.0f);
  }
  SUBCASE("mistakes are ArgumentErrors saying what is wrong") {
    const std::vector<float> three{1, 2, 3}, two{1, 2}, none, five{1, 1, 1, 1, 1};
    const std::vector<float> zero{1, 0, 1}, infinite{std::numeric_limits<float>::infinity()};
    CHECK_THROWS_WITH_AS((void)channel_affine(two, three, 3), "mean has 2 values for 3 channels", ArgumentError);
    CHECK_THROWS_WITH_AS((void)channel_affine(three, three, 4), "mean has 3 values for 4 channels", ArgumentError);
    CHECK_THROWS_WITH_AS((void)channel_affine(none, three, 3), "mean and std need 1 to 4 values, not 0", ArgumentError);
    CHECK_THROWS_WITH_AS((void)channel_affine(three, five, 3), "mean and std need 1 to 4 values, not 5", ArgumentError);
    CHECK_THROWS_WITH_AS((void)channel_affine(three, zero, 3), doctest::Contains("is zero or not finite"),
                         ArgumentError);
    CHECK_THROWS_AS((void)channel_affine(three, infinite, 3), ArgumentError);
    CHECK_THROWS_WITH_AS((void)channel_affine(three, three, 5), "5 channels: images have 1 to 4", ArgumentError);
    CHECK_THROWS_AS(check_mean_std(three, zero), ArgumentError);
    CHECK_NOTHROW(check_mean_std(two, three));  // a channel count would refuse them, none is given
  }
}
