#include "pillow_resample.h"

#include <algorithm>
#include <cmath>

namespace tensorcom::pipeline {
namespace {

// Pillow keeps 8 bits for the result and 2 for overflow (bicubic weights
// can be negative or sum past one): 32 - 8 - 2 fraction bits.
constexpr int kPrecisionBits = 22;
constexpr std::int32_t kHalf = std::int32_t{1} << (kPrecisionBits - 1);

double bilinear(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double support_of(ResampleFilter filter) { return filter == ResampleFilter::kBilinear ? 1.0 : 2.0; }

double weigh(ResampleFilter filter, double x) { return filter == ResampleFilter::kBilinear ? bilinear(x) : bicubic(x); }

// Pillow's rounding of a normalised weight to fixed point: half away from zero.
std::int32_t to_fixed(double k) {
  const double scaled = k * (1 << kPrecisionBits);
  return static_cast<std::int32_t>(k < 0 ? scaled - 0.5 : scaled + 0.5);
}

std::uint8_t clip8(std::int32_t sum) {
  const std::int32_t v = sum >> kPrecisionBits;  // arithmetic: negative sums clip to 0
  return static_cast<std::uint8_t>(std::clamp(v, 0, 255));
}

}  // namespace

ResampleAxis::ResampleAxis(ResampleFilter filter, int in_size, int out_size, int out_first, int out_count) {
  // As Pillow's precompute_coeffs: the filter is stretched by the downscale
  // factor; taps start where centre - support rounds to.
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = support_of(filter) * filter_scale;
  stride_ = static_cast<std::size_t>(std::ceil(support)) * 2 + 1;
  first_.resize(static_cast<std::size_t>(out_count));
  taps_.resize(static_cast<std::size_t>(out_count));
  weights_.assign(static_cast<std::size_t>(out_count) * stride_, 0);
  std::vector<double> k(stride_);
  source_first_ = in_size;
  source_end_ = 0;
  for (int i = 0; i < out_count; ++i) {
    const double center = (out_first + i + 0.5) * scale;
    // Truncation as Pillow's (int) cast, then clamped to the image.
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double total = 0;
    const double ss = 1.0 / filter_scale;  // multiplied, not divided: Pillow's bits
    for (int t = 0; t < xmax; ++t) {
      k[static_cast<std::size_t>(t)] = weigh(filter, (t + xmin - center + 0.5) * ss);
      total += k[static_cast<std::size_t>(t)];
    }
    std::int32_t* w = weights_.data() + static_cast<std::size_t>(i) * stride_;
    for (int t = 0; t < xmax; ++t) w[t] = to_fixed(total != 0.0 ? k[static_cast<std::size_t>(t)] / total : k[static_cast<std::size_t>(t)]);
    first_[static_cast<std::size_t>(i)] = xmin;
    taps_[static_cast<std::size_t>(i)] = xmax;
    source_first_ = std::min(source_first_, xmin);
    source_end_ = std::max(source_end_, xmin + xmax);
  }
}

void PillowResampler::resize_to_rgb(const std::uint8_t* rgbx, std::size_t stride, int origin_x, int origin_y,
                                    const ResampleAxis& x, const ResampleAxis& y, bool flip, std::uint8_t* out) {
  const int out_w = x.out_count();
  const int rows = y.source_end() - y.source_first();
  horizontal_.resize(static_cast<std::size_t>(out_w) * 4 * static_cast<std::size_t>(rows));
  // Horizontal pass over the rows the vertical taps read, into 8 bits.
  for (int r = 0; r < rows; ++r) {
    const std::uint8_t* src = rgbx + static_cast<std::size_t>(y.source_first() + r - origin_y) * stride;
    std::uint8_t* dst = horizontal_.data() + static_cast<std::size_t>(r) * out_w * 4;
    for (int i = 0; i < out_w; ++i) {
      const std::int32_t* w = x.weights(i);
      const std::uint8_t* px = src + static_cast<std::size_t>(x.first(i) - origin_x) * 4;
      std::int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
      for (int t = 0; t < x.taps(i); ++t, px += 4) {
        s0 += px[0] * w[t];
        s1 += px[1] * w[t];
        s2 += px[2] * w[t];
      }
      dst[4 * i] = clip8(s0);
      dst[4 * i + 1] = clip8(s1);
      dst[4 * i + 2] = clip8(s2);
    }
  }
  // Vertical pass into the output's RGB rows.
  const std::size_t row_bytes = static_cast<std::size_t>(out_w) * 4;
  for (int j = 0; j < y.out_count(); ++j) {
    const std::int32_t* w = y.weights(j);
    const std::uint8_t* top = horizontal_.data() + static_cast<std::size_t>(y.first(j) - y.source_first()) * row_bytes;
    std::uint8_t* dst = out + static_cast<std::size_t>(j) * out_w * 3;
    for (int i = 0; i < out_w; ++i) {
      const std::uint8_t* px = top + 4 * static_cast<std::size_t>(i);
      std::int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
      for (int t = 0; t < y.taps(j); ++t, px += row_bytes) {
        s0 += px[0] * w[t];
        s1 += px[1] * w[t];
        s2 += px[2] * w[t];
      }
      std::uint8_t* o = dst + 3 * static_cast<std::size_t>(flip ? out_w - 1 - i : i);
      o[0] = clip8(s0);
      o[1] = clip8(s1);
      o[2] = clip8(s2);
    }
  }
}

}  // namespace tensorcom::pipeline
