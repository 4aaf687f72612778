// The fused resize (bilinear, mirror, RGBX to RGB) against cv::resize with
// INTER_LINEAR, and its vector version against its portable one, on sizes
// around the vector steps' edges, shrinking and enlarging, with padded rows.
#include "resample/rgbx_resize.h"

#include <doctest/doctest.h>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

using namespace tensorcom::imaging;

namespace {

// Smooth gradients plus noise: natural-looking, yet every pixel differs.
cv::Mat test_image(int width, int height, std::size_t pad, std::mt19937& rng) {
  cv::Mat padded(height, width + static_cast<int>(pad), CV_8UC4);
  std::uniform_int_distribution<int> noise(-40, 40);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < padded.cols; ++x) {
      auto* px = padded.ptr<std::uint8_t>(y) + 4 * x;
      px[0] = cv::saturate_cast<std::uint8_t>(x * 255 / (width + 1) + noise(rng));
      px[1] = cv::saturate_cast<std::uint8_t>(y * 255 / (height + 1) + noise(rng));
      px[2] = cv::saturate_cast<std::uint8_t>(128 + noise(rng) * 3);
      px[3] = static_cast<std::uint8_t>(rng());
    }
  }
  return padded(cv::Rect(0, 0, width, height));  // rows keep the padded stride
}

int max_difference(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat diff;
  cv::absdiff(a, b, diff);
  double most = 0;
  cv::minMaxLoc(diff.reshape(1), nullptr, &most);
  return static_cast<int>(most);
}

}  // namespace

TEST_CASE("RgbxResizer matches cv::resize INTER_LINEAR, mirrored or not") {
  std::mt19937 rng(7);
  RgbxResizer resizer;
  struct Case {
    int width, height, out_width, out_height;
  };
  for (Case c : std::vector<Case>{{300, 280, 224, 224},
                                  {225, 224, 224, 224},
                                  {224, 224, 224, 224},
                                  {997, 601, 224, 224},
                                  {50, 40, 224, 224},
                                  {2, 2, 7, 5},
                                  {1, 1, 3, 3},
                                  {1, 9, 4, 4},
                                  {9, 1, 4, 4},
                                  {333, 257, 17, 19},
                                  {320, 320, 160, 161}}) {
    for (std::size_t pad : {0, 3}) {
      cv::Mat image = test_image(c.width, c.height, pad, rng);
      cv::Mat rgb;
      cv::cvtColor(image, rgb, cv::COLOR_RGBA2RGB);
      cv::Mat want;
      cv::resize(rgb, want, cv::Size(c.out_width, c.out_height), 0, 0, cv::INTER_LINEAR);
      for (bool flip : {false, true}) {
        CAPTURE(c.width);
        CAPTURE(c.height);
        CAPTURE(c.out_width);
        CAPTURE(c.out_height);
        CAPTURE(pad);
        CAPTURE(flip);
        const std::size_t bytes = static_cast<std::size_t>(c.out_width) * c.out_height * 3;
        // A guard byte past the end catches stores that overrun the last row.
        std::vector<std::uint8_t> got(bytes + 1, 0xAB), portable(bytes + 1, 0xAB);
        resizer.resize_to_rgb(image.data, c.width, c.height, image.step, c.out_width, c.out_height, flip, got.data());
        resizer.resize_to_rgb_portable(image.data, c.width, c.height, image.step, c.out_width, c.out_height, flip,
                                       portable.data());
        CHECK(got.back() == 0xAB);
        CHECK(got == portable);
        cv::Mat expected = want.clone();
        if (flip) cv::flip(want, expected, 1);
        CHECK(max_difference(cv::Mat(c.out_height, c.out_width, CV_8UC3, got.data()), expected) <= 1);
      }
    }
  }
}

TEST_CASE("RgbxResizer keeps a flat colour exact at every scale") {
  RgbxResizer resizer;
  cv::Mat flat(37, 53, CV_8UC4, cv::Scalar(255, 0, 131, 9));
  for (int size : {1, 16, 36, 54, 224}) {
    std::vector<std::uint8_t> got(static_cast<std::size_t>(size) * size * 3);
    resizer.resize_to_rgb(flat.data, flat.cols, flat.rows, flat.step, size, size, size % 2 == 0, got.data());
    for (std::size_t i = 0; i < got.size(); i += 3) {
      REQUIRE(got[i] == 255);
      REQUIRE(got[i + 1] == 0);
      REQUIRE(got[i + 2] == 131);
    }
  }
}
