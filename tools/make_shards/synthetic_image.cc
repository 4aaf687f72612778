#include "synthetic_image.h"

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tensorcom/codec/error.h"

namespace make_shards {

namespace {

constexpr int kHueRange = 180;          // OpenCV's 8-bit hue scale
constexpr int kHueJitter = 14;          // how far a colour may stray from its class hue
constexpr double kTextureWeight = 0.3;  // of the mid-frequency luminance texture
constexpr int kGrainOffset = 8;         // grain bytes are 0..15; this centres them

// splitmix64's finaliser: neighbouring (seed, index) pairs give unrelated streams.
[[nodiscard]] std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

[[nodiscard]] cv::Scalar random_colour(cv::RNG& rng) {
  return cv::Scalar(rng.uniform(0, 256), rng.uniform(0, 256), rng.uniform(0, 256));
}

// A smooth colour field: a few cells of colours near the class hue, upsampled
// with bicubic interpolation (which also gives soft over- and undershoots).
[[nodiscard]] cv::Mat colour_field(cv::RNG& rng, cv::Size size, int hue) {
  cv::Mat cells(rng.uniform(2, 7), rng.uniform(2, 7), CV_8UC3);
  for (int y = 0; y < cells.rows; ++y) {
    for (int x = 0; x < cells.cols; ++x) {
      int h = (hue + rng.uniform(-kHueJitter, kHueJitter + 1) + kHueRange) % kHueRange;
      cells.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>(h), static_cast<uchar>(rng.uniform(40, 230)),
                                            static_cast<uchar>(rng.uniform(40, 245)));
    }
  }
  cv::cvtColor(cells, cells, cv::COLOR_HSV2BGR);
  cv::Mat field;
  cv::resize(cells, field, size, 0, 0, cv::INTER_CUBIC);
  return field;
}

// Adds mid-frequency luminance texture (like foliage or fabric at a distance).
void add_texture(cv::RNG& rng, cv::Mat& image) {
  int step = rng.uniform(6, 20);
  cv::Mat coarse(image.rows / step + 2, image.cols / step + 2, CV_8UC1);
  rng.fill(coarse, cv::RNG::UNIFORM, 0, 256);
  cv::Mat texture;
  cv::resize(coarse, texture, image.size(), 0, 0, cv::INTER_CUBIC);
  cv::cvtColor(texture, texture, cv::COLOR_GRAY2BGR);
  cv::addWeighted(image, 1.0, texture, kTextureWeight, -128.0 * kTextureWeight, image);
}

// Draws a few filled or outlined circles, rectangles, ellipses and lines.
void draw_shapes(cv::RNG& rng, cv::Mat& image) {
  int shortest = std::min(image.rows, image.cols);
  int count = rng.uniform(3, 9);
  for (int i = 0; i < count; ++i) {
    cv::Point a(rng.uniform(0, image.cols), rng.uniform(0, image.rows));
    cv::Point b(rng.uniform(0, image.cols), rng.uniform(0, image.rows));
    cv::Scalar colour = random_colour(rng);
    int thickness = rng.uniform(0, 3) == 0 ? rng.uniform(2, 8) : cv::FILLED;
    int radius = rng.uniform(shortest / 16 + 1, shortest / 3 + 2);
    switch (rng.uniform(0, 4)) {
      case 0: cv::circle(image, a, radius, colour, thickness, cv::LINE_AA); break;
      case 1: cv::rectangle(image, a, b, colour, thickness, cv::LINE_AA); break;
      case 2:
        cv::ellipse(image, a, cv::Size(radius, rng.uniform(radius / 4 + 1, radius + 1)), rng.uniform(0, 180), 0, 360,
                    colour, thickness, cv::LINE_AA);
        break;
      default: cv::line(image, a, b, colour, rng.uniform(2, 12), cv::LINE_AA); break;
    }
  }
}

// Adds sensor grain: uniform noise in [-8, 7] (std dev 4.6) on every channel
// of every pixel. Drawn from splitmix64 rather than cv::RNG::fill, which took
// most of the run time; it looks the same after JPEG.
void add_grain(std::uint64_t seed, cv::Mat& image) {
  cv::Mat noise(image.size(), CV_8UC3);
  auto* bytes = noise.ptr<uchar>();  // continuous: freshly allocated
  std::size_t size = noise.total() * noise.elemSize();
  std::uint64_t state = seed;
  for (std::size_t i = 0; i < size; i += 8) {
    std::uint64_t word = mix(state++) & 0x0F0F0F0F0F0F0F0Full;
    std::memcpy(bytes + i, &word, std::min<std::size_t>(8, size - i));
  }
  cv::add(image, noise, image);
  cv::subtract(image, cv::Scalar::all(kGrainOffset), image);
}

}  // namespace

tensorcom::formats::ByteBuffer synthetic_jpeg(std::uint64_t index, std::int64_t label,
                                              const SyntheticImageOptions& options) {
  cv::RNG rng(mix(options.seed ^ mix(index)));
  // Width and height drawn apart: aspect ratios vary, as in photo collections.
  int width = rng.uniform(options.min_side, options.max_side + 1);
  int height = rng.uniform(options.min_side, options.max_side + 1);
  cv::Size size(width, height);
  int hue = static_cast<int>(label % options.classes * kHueRange / options.classes);
  cv::Mat image = colour_field(rng, size, hue);
  add_texture(rng, image);
  draw_shapes(rng, image);
  add_grain(rng.next(), image);
  std::vector<unsigned char> jpeg;
  std::vector<int> params{
      cv::IMWRITE_JPEG_QUALITY, options.quality, cv::IMWRITE_JPEG_PROGRESSIVE, 0, cv::IMWRITE_JPEG_OPTIMIZE, 0};
  if (!cv::imencode(".jpg", image, jpeg, params))
    throw tensorcom::Error("cannot encode synthetic image " + std::to_string(index) + " as JPEG");
  const auto* bytes = reinterpret_cast<const std::byte*>(jpeg.data());
  return tensorcom::formats::ByteBuffer(bytes, bytes + jpeg.size());
}

}  // namespace make_shards
