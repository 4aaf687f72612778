#include "pillow_resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_features.h"

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

namespace {

// One pass over `count` outputs, each a weighted sum of pixels `step` bytes
// apart starting at pixel_of(i): RGBX in, RGBX (X undefined) out, 4 bytes
// an output. The portable form of the vector loops below.
template <class Axis, class PixelOf>
void pass_portable(const Axis& axis, int count, std::size_t step, PixelOf pixel_of, std::uint8_t* dst) {
  for (int i = 0; i < count; ++i) {
    const std::int32_t* w = axis.weights(i);
    const std::uint8_t* px = pixel_of(i);
    std::int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
    for (int t = 0; t < axis.taps(i); ++t, px += step) {
      s0 += px[0] * w[t];
      s1 += px[1] * w[t];
      s2 += px[2] * w[t];
    }
    dst[4 * i] = clip8(s0);
    dst[4 * i + 1] = clip8(s1);
    dst[4 * i + 2] = clip8(s2);
  }
}

#ifdef TENSORCOM_HAVE_SSSE3_PATH
// Four channels of one pixel in 32-bit lanes: exact products of 8-bit
// pixels and 22-bit weights, as the portable loop's, so the same bits.
__attribute__((target("sse4.1"))) inline __m128i widen_pixel(const std::uint8_t* px) {
  std::int32_t four;
  std::memcpy(&four, px, 4);
  return _mm_cvtepu8_epi32(_mm_cvtsi32_si128(four));
}

__attribute__((target("sse4.1"))) inline std::int32_t narrow_pixel(__m128i sum) {
  // The arithmetic shift and the saturating packs clamp to 0..255 as clip8.
  const __m128i v = _mm_srai_epi32(sum, kPrecisionBits);
  return _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(v, v), v));
}

template <class Axis, class PixelOf>
__attribute__((target("sse4.1"))) void pass_sse41(const Axis& axis, int count, std::size_t step,
                                                    PixelOf pixel_of, std::uint8_t* dst) {
  const __m128i half = _mm_set1_epi32(kHalf);
  for (int i = 0; i < count; ++i) {
    const std::int32_t* w = axis.weights(i);
    const std::uint8_t* px = pixel_of(i);
    __m128i sum = half;
    for (int t = 0; t < axis.taps(i); ++t, px += step) {
      sum = _mm_add_epi32(sum, _mm_mullo_epi32(widen_pixel(px), _mm_set1_epi32(w[t])));
    }
    const std::int32_t out = narrow_pixel(sum);
    std::memcpy(dst + 4 * i, &out, 4);
  }
}

// The vertical pass, four output pixels at a time: one row of weights
// serves a whole output row.
__attribute__((target("sse4.1"))) void vertical_row_sse41(const std::uint8_t* top, std::size_t row_bytes,
                                                           const std::int32_t* w, int taps, int pixels,
                                                           std::uint8_t* dst) {
  const __m128i half = _mm_set1_epi32(kHalf);
  int i = 0;
  for (; i + 4 <= pixels; i += 4) {
    __m128i s0 = half, s1 = half, s2 = half, s3 = half;
    const std::uint8_t* px = top + 4 * static_cast<std::size_t>(i);
    for (int t = 0; t < taps; ++t, px += row_bytes) {
      const __m128i k = _mm_set1_epi32(w[t]);
      const __m128i sixteen = _mm_loadu_si128(reinterpret_cast<const __m128i*>(px));
      s0 = _mm_add_epi32(s0, _mm_mullo_epi32(_mm_cvtepu8_epi32(sixteen), k));
      s1 = _mm_add_epi32(s1, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(sixteen, 4)), k));
      s2 = _mm_add_epi32(s2, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(sixteen, 8)), k));
      s3 = _mm_add_epi32(s3, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(sixteen, 12)), k));
    }
    const __m128i lo = _mm_packs_epi32(_mm_srai_epi32(s0, kPrecisionBits), _mm_srai_epi32(s1, kPrecisionBits));
    const __m128i hi = _mm_packs_epi32(_mm_srai_epi32(s2, kPrecisionBits), _mm_srai_epi32(s3, kPrecisionBits));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4 * static_cast<std::size_t>(i)), _mm_packus_epi16(lo, hi));
  }
  for (; i < pixels; ++i) {
    __m128i sum = half;
    const std::uint8_t* px = top + 4 * static_cast<std::size_t>(i);
    for (int t = 0; t < taps; ++t, px += row_bytes) sum = _mm_add_epi32(sum, _mm_mullo_epi32(widen_pixel(px), _mm_set1_epi32(w[t])));
    const std::int32_t out = narrow_pixel(sum);
    std::memcpy(dst + 4 * static_cast<std::size_t>(i), &out, 4);
  }
}
#endif

// RGBX to RGB, mirrored if flip.
void drop_padding(const std::uint8_t* rgbx, int pixels, bool flip, std::uint8_t* rgb) {
  for (int i = 0; i < pixels; ++i) {
    std::uint8_t* o = rgb + 3 * static_cast<std::size_t>(flip ? pixels - 1 - i : i);
    o[0] = rgbx[4 * i];
    o[1] = rgbx[4 * i + 1];
    o[2] = rgbx[4 * i + 2];
  }
}

}  // namespace

void PillowResampler::resize_to_rgb(const std::uint8_t* rgbx, std::size_t stride, int origin_x, int origin_y,
                                    const ResampleAxis& x, const ResampleAxis& y, bool flip, std::uint8_t* out) {
  run(rgbx, stride, origin_x, origin_y, x, y, flip, out, cpu_has_sse41());
}

void PillowResampler::resize_to_rgb_portable(const std::uint8_t* rgbx, std::size_t stride, int origin_x, int origin_y,
                                             const ResampleAxis& x, const ResampleAxis& y, bool flip,
                                             std::uint8_t* out) {
  run(rgbx, stride, origin_x, origin_y, x, y, flip, out, false);
}

void PillowResampler::run(const std::uint8_t* rgbx, std::size_t stride, int origin_x, int origin_y,
                          const ResampleAxis& x, const ResampleAxis& y, bool flip, std::uint8_t* out, bool vector) {
  const int out_w = x.out_count();
  const int rows = y.source_end() - y.source_first();
  const std::size_t row_bytes = static_cast<std::size_t>(out_w) * 4;
  // 16 bytes of slack: the vector loops load whole 16-byte groups.
  horizontal_.resize(row_bytes * static_cast<std::size_t>(rows) + 16);
  line_.resize(row_bytes + 16);
#ifndef TENSORCOM_HAVE_SSSE3_PATH
  (void)vector;  // no vector loops in this build
#endif
  // Horizontal pass over the rows the vertical taps read, into 8 bits.
  for (int r = 0; r < rows; ++r) {
    const std::uint8_t* src = rgbx + static_cast<std::size_t>(y.source_first() + r - origin_y) * stride;
    auto pixel_of = [&](int i) { return src + static_cast<std::size_t>(x.first(i) - origin_x) * 4; };
    std::uint8_t* dst = horizontal_.data() + static_cast<std::size_t>(r) * row_bytes;
#ifdef TENSORCOM_HAVE_SSSE3_PATH
    if (vector) {
      pass_sse41(x, out_w, 4, pixel_of, dst);
      continue;
    }
#endif
    pass_portable(x, out_w, 4, pixel_of, dst);
  }
  // Vertical pass, a row of RGBX at a time, then into the output's RGB row.
  for (int j = 0; j < y.out_count(); ++j) {
    const std::uint8_t* top = horizontal_.data() + static_cast<std::size_t>(y.first(j) - y.source_first()) * row_bytes;
#ifdef TENSORCOM_HAVE_SSSE3_PATH
    if (vector) {
      vertical_row_sse41(top, row_bytes, y.weights(j), y.taps(j), out_w, line_.data());
    } else
#endif
    {
      const int taps = y.taps(j);
      const std::int32_t* w = y.weights(j);
      auto pixel_of = [&](int i) { return top + 4 * static_cast<std::size_t>(i); };
      // Every output pixel of the row shares the row's weights.
      struct RowAxis {
        int taps_;
        const std::int32_t* w_;
        int taps(int) const { return taps_; }
        const std::int32_t* weights(int) const { return w_; }
      } row{taps, w};
      pass_portable(row, out_w, row_bytes, pixel_of, line_.data());
    }
    drop_padding(line_.data(), out_w, flip, out + static_cast<std::size_t>(j) * out_w * 3);
  }
}

}  // namespace tensorcom::pipeline
