// Pillow's resampling: its values on small rows, the tap plan, and the
// vector loops giving the portable loops' bits.
#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <random>
#include <vector>

#include "pillow_resample.h"

using namespace tensorcom::pipeline;

namespace {

// One RGB row as RGBX.
std::vector<std::uint8_t> rgbx_row(const std::vector<std::array<int, 3>>& pixels) {
  std::vector<std::uint8_t> out;
  for (const auto& p : pixels) {
    for (int c : {p[0], p[1], p[2], 0}) out.push_back(static_cast<std::uint8_t>(c));
  }
  return out;
}

std::vector<std::uint8_t> resize_row(ResampleFilter filter, const std::vector<std::uint8_t>& row, int out_size) {
  const int in = static_cast<int>(row.size() / 4);
  ResampleAxis x(filter, in, out_size, 0, out_size), y(filter, 1, 1, 0, 1);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(out_size) * 3);
  PillowResampler().resize_to_rgb(row.data(), row.size(), 0, 0, x, y, false, out.data());
  return out;
}

}  // namespace

TEST_CASE("Pillow's values on a four-pixel row") {
  // Image.fromarray(row).resize((n, 1), filter) with Pillow 9.4.
  const auto row = rgbx_row({{0, 255, 10}, {100, 0, 20}, {200, 255, 30}, {255, 0, 40}});
  CHECK(resize_row(ResampleFilter::kBilinear, row, 2) == std::vector<std::uint8_t>{71, 146, 17, 209, 109, 33});
  CHECK(resize_row(ResampleFilter::kBicubic, row, 2) == std::vector<std::uint8_t>{60, 148, 16, 221, 107, 34});
  CHECK(resize_row(ResampleFilter::kBilinear, row, 7) ==
        std::vector<std::uint8_t>{0, 255, 10, 36, 164, 14, 93, 18, 19, 150, 128, 25, 204, 237, 31, 235, 91, 36, 255, 0, 40});
  CHECK(resize_row(ResampleFilter::kBicubic, row, 7) ==
        std::vector<std::uint8_t>{0, 255, 9, 26, 168, 13, 92, 4, 19, 153, 128, 25, 206, 251, 31, 242, 87, 37, 255, 0, 41});
}

TEST_CASE("an axis plan reads only what its window needs") {
  // 1000 -> 250, window of 10 at 100: a triangle 4 pixels wide on each side.
  ResampleAxis axis(ResampleFilter::kBilinear, 1000, 250, 100, 10);
  CHECK(axis.out_count() == 10);
  CHECK(axis.source_first() == 398);  // centre 402, support 4
  CHECK(axis.source_end() == 442);   // the last centre, 438, plus 4
  std::int64_t sum = 0;
  for (int t = 0; t < axis.taps(0); ++t) sum += axis.weights(0)[t];
  CHECK(std::abs(sum - (std::int64_t{1} << 22)) <= axis.taps(0));  // normalised, rounded per tap
}

TEST_CASE("the vector loops give the portable loops' bits") {
  std::mt19937 rng(7);
  PillowResampler resampler;
  for (int round = 0; round < 200; ++round) {
    const int w = std::uniform_int_distribution<int>(1, 300)(rng);
    const int h = std::uniform_int_distribution<int>(1, 300)(rng);
    const int ow = std::uniform_int_distribution<int>(1, 260)(rng);
    const int oh = std::uniform_int_distribution<int>(1, 260)(rng);
    const int cw = std::uniform_int_distribution<int>(1, ow)(rng);
    const int ch = std::uniform_int_distribution<int>(1, oh)(rng);
    const int cx = std::uniform_int_distribution<int>(0, ow - cw)(rng);
    const int cy = std::uniform_int_distribution<int>(0, oh - ch)(rng);
    const auto filter = round % 2 ? ResampleFilter::kBicubic : ResampleFilter::kBilinear;
    const bool flip = round % 3 == 0;
    std::vector<std::uint8_t> image(static_cast<std::size_t>(w) * h * 4);
    for (auto& b : image) b = static_cast<std::uint8_t>(rng());
    ResampleAxis x(filter, w, ow, cx, cw), y(filter, h, oh, cy, ch);
    // The source box only, as the JPEG path decodes it.
    const std::uint8_t* box = image.data() + (static_cast<std::size_t>(y.source_first()) * w + x.source_first()) * 4;
    std::vector<std::uint8_t> a(static_cast<std::size_t>(cw) * ch * 3), b(a.size());
    resampler.resize_to_rgb(box, static_cast<std::size_t>(w) * 4, x.source_first(), y.source_first(), x, y, flip, a.data());
    resampler.resize_to_rgb_portable(box, static_cast<std::size_t>(w) * 4, x.source_first(), y.source_first(), x, y, flip,
                                     b.data());
    INFO(w, "x", h, " -> ", ow, "x", oh, " window ", cx, ",", cy, " ", cw, "x", ch);
    REQUIRE(a == b);
  }
}
