// Pillow's resampling: its values on small rows, the tap plan, and the
// vector loops giving the portable loops' bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <random>
#include <vector>

#include "resample/pillow_resample.h"
#include "tensorcom/codec/error.h"

using namespace tensorcom::imaging;

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
  CHECK(resize_row(ResampleFilter::kBilinear, row, 7) == std::vector<std::uint8_t>{0,  255, 10,  36,  164, 14,  93,
                                                                                   18, 19,  150, 128, 25,  204, 237,
                                                                                   31, 235, 91,  36,  255, 0,   40});
  CHECK(resize_row(ResampleFilter::kBicubic, row, 7) == std::vector<std::uint8_t>{0,  255, 9,   26,  168, 13,  92,
                                                                                  4,  19,  153, 128, 25,  206, 251,
                                                                                  31, 242, 87,  37,  255, 0,   41});
}

TEST_CASE("an axis plan reads only what its window needs") {
  // 1000 -> 250, window of 10 at 100: a triangle 4 pixels wide on each side.
  ResampleAxis axis(ResampleFilter::kBilinear, 1000, 250, 100, 10);
  CHECK(axis.out_count() == 10);
  CHECK(axis.source_first() == 398);  // centre 402, support 4
  CHECK(axis.source_end() == 442);    // the last centre, 438, plus 4
  std::int64_t sum = 0;
  for (int t = 0; t < axis.taps(0); ++t) sum += axis.weights(0)[t];
  CHECK(std::abs(sum - (std::int64_t{1} << 22)) <= axis.taps(0));  // normalised, rounded per tap
}

TEST_CASE("every vector path gives the portable loops' bits") {
  std::mt19937 rng(7);
  PillowResampler resampler;
  for (int round = 0; round < 300; ++round) {
    // Shrinks up to 12x (up to about 50 taps), enlargements, odd sizes.
    const int w = std::uniform_int_distribution<int>(1, round % 5 == 0 ? 1500 : 300)(rng);
    const int h = std::uniform_int_distribution<int>(1, round % 7 == 0 ? 1500 : 300)(rng);
    const int ow = std::uniform_int_distribution<int>(1, 260)(rng);
    const int oh = std::uniform_int_distribution<int>(1, 260)(rng);
    const int cw = std::uniform_int_distribution<int>(1, ow)(rng);
    const int ch = std::uniform_int_distribution<int>(1, oh)(rng);
    const int cx = std::uniform_int_distribution<int>(0, ow - cw)(rng);
    const int cy = std::uniform_int_distribution<int>(0, oh - ch)(rng);
    const auto filter = round % 2 ? ResampleFilter::kBicubic : ResampleFilter::kBilinear;
    const bool flip = round % 3 == 0;
    ResampleAxis x(filter, w, ow, cx, cw), y(filter, h, oh, cy, ch);
    // The source box only, in a buffer of its own as the JPEG path decodes
    // it: a loop reading past the box would show under AddressSanitizer.
    const int bw = x.source_end() - x.source_first(), bh = y.source_end() - y.source_first();
    std::vector<std::uint8_t> box(static_cast<std::size_t>(bw) * bh * 4);
    for (auto& b : box) b = static_cast<std::uint8_t>(rng());
    const std::size_t stride = static_cast<std::size_t>(bw) * 4;
    std::vector<std::uint8_t> portable(static_cast<std::size_t>(cw) * ch * 3);
    resampler.resize_to_rgb(box.data(), stride, x.source_first(), y.source_first(), x, y, flip, portable.data(),
                            ResampleKernels::kPortable);
    for (auto kernels : {ResampleKernels::kSse41, ResampleKernels::kAvx2}) {
      if (!PillowResampler::available(kernels)) continue;
      std::vector<std::uint8_t> vector(portable.size());
      resampler.resize_to_rgb(box.data(), stride, x.source_first(), y.source_first(), x, y, flip, vector.data(),
                              kernels);
      INFO(w, "x", h, " -> ", ow, "x", oh, " window ", cx, ",", cy, " ", cw, "x", ch, " kernels ",
           static_cast<int>(kernels));
      REQUIRE(vector == portable);
    }
  }
}

TEST_CASE("a source span is Pillow's box") {
  // The whole line as a span is the plain plan, weight for weight.
  ResampleAxis plain(ResampleFilter::kBilinear, 500, 224, 0, 224);
  ResampleAxis spanned(ResampleFilter::kBilinear, SourceSpan{0, 500, 0, 500}, 224, 0, 224);
  for (int i = 0; i < 224; ++i) {
    REQUIRE(plain.first(i) == spanned.first(i));
    REQUIRE(plain.taps(i) == spanned.taps(i));
    for (int t = 0; t < plain.taps(i); ++t) REQUIRE(plain.weights(i)[t] == spanned.weights(i)[t]);
  }
  // A span between pixels: [10.5, 30.5) to 10 pixels, 2x, taps clamped to
  // [10, 31): output 0 is centred on 11.5, so the triangle twice as wide
  // reaches pixels 10..13 (Pillow's rounding of centre +- support) with
  // weights 1/4, 1/2, 1/4 and 0.
  ResampleAxis half(ResampleFilter::kBilinear, SourceSpan{10.5, 30.5, 10, 31}, 10, 0, 10);
  CHECK(half.first(0) == 10);
  CHECK(half.taps(0) == 4);
  CHECK(half.weights(0)[0] == 1 << 20);
  CHECK(half.weights(0)[1] == 1 << 21);
  CHECK(half.weights(0)[2] == 1 << 20);
  CHECK(half.weights(0)[3] == 0);
  CHECK(half.source_first() == 10);
  CHECK(half.source_end() == 31);
}

TEST_CASE("rows taken a few at a time give what the whole box gives") {
  // As the decoder hands them over: chunks of any size, starting above the
  // rows the vertical taps read and ending below them; axes packed for
  // their own pass only.
  std::mt19937 rng(9);
  PillowResampler whole, streamed;
  for (int round = 0; round < 60; ++round) {
    const int w = std::uniform_int_distribution<int>(1, 400)(rng), h = std::uniform_int_distribution<int>(1, 400)(rng);
    const int out = std::uniform_int_distribution<int>(1, 224)(rng);
    const SourceSpan span_x{0, static_cast<double>(w), 0, w}, span_y{0, static_cast<double>(h), 0, h};
    const ResampleAxis x(ResampleFilter::kBilinear, span_x, out, 0, out, AxisPass::kHorizontal);
    const ResampleAxis y(ResampleFilter::kBilinear, span_y, out, 0, out, AxisPass::kVertical);
    const std::size_t stride = static_cast<std::size_t>(w) * 4;
    std::vector<std::uint8_t> image(stride * static_cast<std::size_t>(h));
    for (auto& b : image) b = static_cast<std::uint8_t>(rng());
    std::vector<std::uint8_t> expected(static_cast<std::size_t>(out) * out * 3), got(expected.size());
    whole.resize_to_rgb(image.data(), stride, 0, 0, x, y, round % 2 == 0, expected.data());
    streamed.begin(x, y, 0, round % 2 == 0, PillowResampler::fastest());
    for (int row = 0; row < h;) {
      const int count = std::min(h - row, std::uniform_int_distribution<int>(1, 17)(rng));
      streamed.take_rows(image.data() + static_cast<std::size_t>(row) * stride, stride, row, count);
      row += count;
    }
    streamed.finish(got.data());
    INFO(w, "x", h, " -> ", out);
    REQUIRE(got == expected);
  }
}

TEST_CASE("axes packed for one pass are refused for the other") {
  const SourceSpan span{0, 100, 0, 100};
  const ResampleAxis horizontal(ResampleFilter::kBilinear, span, 50, 0, 50, AxisPass::kHorizontal);
  const ResampleAxis vertical(ResampleFilter::kBilinear, span, 50, 0, 50, AxisPass::kVertical);
  PillowResampler resampler;
  CHECK_NOTHROW(resampler.begin(horizontal, vertical, 0, false, ResampleKernels::kPortable));
  CHECK_THROWS_AS(resampler.begin(vertical, horizontal, 0, false, ResampleKernels::kPortable),
                  tensorcom::ArgumentError);
  CHECK_THROWS_AS(resampler.begin(horizontal, horizontal, 0, false, ResampleKernels::kPortable),
                  tensorcom::ArgumentError);
}
