#include "resample/rgbx_resize.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "resample/cpu_features.h"
#include "resample/rgbx_to_rgb.h"

namespace tensorcom::imaging {

namespace {

// OpenCV's fixed point: weights out of 2^11; rows resampled across keep
// 2^7 of that scale (>> 4) so that they fit in 16 bits, and the blend of
// two rows takes the high half of 16x16-bit products, then rounds off the
// last 2 bits. Both versions below compute exactly this.
constexpr int kWeightOne = 1 << 11;
constexpr int kAcrossShift = 4;

void resample_across_portable(const std::uint8_t* src, int width, const auto* columns, int count, std::int16_t* dst,
                              int from) {
  for (int d = from; d < count; ++d) {
    const int left = columns[d].offset;
    const int right = std::min(left + 1, width - 1);
    const int w1 = columns[d].weight, w0 = kWeightOne - w1;
    for (int c = 0; c < 4; ++c) {
      dst[4 * d + c] = static_cast<std::int16_t>((src[4 * left + c] * w0 + src[4 * right + c] * w1) >> kAcrossShift);
    }
  }
}

void blend_rows_portable(const std::int16_t* upper, const std::int16_t* lower, int lower_weight, int count,
                         std::uint8_t* out, int from) {
  const int w0 = kWeightOne - lower_weight, w1 = lower_weight;
  for (int i = from; i < count; ++i) {
    const int v = (((upper[i] * w0) >> 16) + ((lower[i] * w1) >> 16) + 2) >> 2;
    out[i] = static_cast<std::uint8_t>(std::clamp(v, 0, 255));
  }
}

#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
// One output pixel: one 8-byte load takes both source pixels, a shuffle
// interleaves them channel by channel as 16-bit pairs, and one multiply-add
// applies the pair of weights, which `pairs` holds ready four times over.
// The right pixel must lie in the row, which taps() sees to when the row has
// 2 pixels or more.
__attribute__((target("ssse3"))) inline __m128i resample_pixel(const std::uint8_t* src, int left,
                                                               const std::int32_t* pairs) {
  const __m128i interleave = _mm_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1);
  const __m128i px = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 4 * left));
  const __m128i weights = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pairs));
  return _mm_srai_epi32(_mm_madd_epi16(_mm_shuffle_epi8(px, interleave), weights), kAcrossShift);
}

// Requires width >= 2; pairs: four copies of each column's weight pair.
__attribute__((target("ssse3"))) void resample_across_ssse3(const std::uint8_t* src, int width, const auto* columns,
                                                            const std::int32_t* pairs, int count, std::int16_t* dst) {
  int d = 0;
  for (; d + 2 <= count; d += 2) {
    const __m128i a = resample_pixel(src, columns[d].offset, pairs + 4 * d);
    const __m128i b = resample_pixel(src, columns[d + 1].offset, pairs + 4 * d + 4);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4 * d), _mm_packs_epi32(a, b));
  }
  resample_across_portable(src, width, columns, count, dst, d);
}

// Eight channel values of the two rows, weighted, rounded, still 16-bit.
__attribute__((target("ssse3"))) inline __m128i blend_eight(const std::int16_t* upper, const std::int16_t* lower,
                                                            __m128i w0, __m128i w1) {
  const __m128i u = _mm_loadu_si128(reinterpret_cast<const __m128i*>(upper));
  const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lower));
  const __m128i sum = _mm_add_epi16(_mm_mulhi_epi16(u, w0), _mm_mulhi_epi16(l, w1));
  return _mm_srai_epi16(_mm_add_epi16(sum, _mm_set1_epi16(2)), 2);
}

__attribute__((target("ssse3"))) void blend_rows_ssse3(const std::int16_t* upper, const std::int16_t* lower,
                                                       int lower_weight, int count, std::uint8_t* out) {
  const __m128i w0 = _mm_set1_epi16(static_cast<std::int16_t>(kWeightOne - lower_weight));
  const __m128i w1 = _mm_set1_epi16(static_cast<std::int16_t>(lower_weight));
  int i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m128i low = blend_eight(upper + i, lower + i, w0, w1);
    const __m128i high = blend_eight(upper + i + 8, lower + i + 8, w0, w1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi16(low, high));
  }
  blend_rows_portable(upper, lower, lower_weight, count, out, i);
}

#endif

}  // namespace

void RgbxResizer::taps(int in, int out, bool mirror, std::vector<Tap>& result) {
  result.resize(static_cast<std::size_t>(out));
  const double scale = static_cast<double>(in) / out;
  for (int d = 0; d < out; ++d) {
    const int at = mirror ? out - 1 - d : d;
    // OpenCV computes the source position in float; so do we, to sample alike.
    auto position = static_cast<float>((at + 0.5) * scale - 0.5);
    int left = static_cast<int>(std::floor(position));
    float fraction = position - static_cast<float>(left);
    if (left < 0) left = 0, fraction = 0;
    if (left >= in - 1) left = in - 1, fraction = 0;
    auto weight = static_cast<std::int16_t>(std::lround(fraction * kWeightOne));
    // The same sample with both taps inside the image: all of the last pixel.
    if (left == in - 1 && in >= 2) left = in - 2, weight = kWeightOne;
    result[static_cast<std::size_t>(d)] = Tap{left, weight};
  }
}

void RgbxResizer::run(const std::uint8_t* rgbx, int width, int height, std::size_t stride, int out_width,
                      int out_height, bool flip, std::uint8_t* out, bool vector) {
  taps(width, out_width, flip, columns_);
  taps(height, out_height, false, rows_);
  const int count = out_width * 4;
  upper_.resize(static_cast<std::size_t>(count));
  lower_.resize(static_cast<std::size_t>(count));
  rgbx_row_.resize(static_cast<std::size_t>(count));
  const bool vector_across = vector && width >= 2;
  if (vector_across) {
    // Both 16-bit weights of a column in one 32-bit lane, once per channel.
    column_pairs_.resize(static_cast<std::size_t>(count));
    for (int d = 0; d < out_width; ++d) {
      const int w1 = columns_[static_cast<std::size_t>(d)].weight;
      std::fill_n(column_pairs_.begin() + 4 * d, 4, (kWeightOne - w1) | (w1 << 16));
    }
  }
  auto resample = [&](int row, std::vector<std::int16_t>& dst) {
    const std::uint8_t* src = rgbx + static_cast<std::size_t>(row) * stride;
#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
    if (vector_across)
      return resample_across_ssse3(src, width, columns_.data(), column_pairs_.data(), out_width, dst.data());
#endif
    resample_across_portable(src, width, columns_.data(), out_width, dst.data(), 0);
  };
  // Shrinking by less than 2 reuses most source rows for two output rows:
  // each is resampled across once, while it is the upper or lower one.
  int have_upper = -1, have_lower = -1;
  for (int y = 0; y < out_height; ++y) {
    const Tap& tap = rows_[static_cast<std::size_t>(y)];
    const int below = std::min(tap.offset + 1, height - 1);
    if (have_upper != tap.offset) {
      if (have_lower == tap.offset) {
        std::swap(upper_, lower_);
        std::swap(have_upper, have_lower);
      } else {
        resample(tap.offset, upper_);
        have_upper = tap.offset;
      }
    }
    if (have_lower != below) {
      resample(below, lower_);
      have_lower = below;
    }
#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
    if (vector) {
      blend_rows_ssse3(upper_.data(), lower_.data(), tap.weight, count, rgbx_row_.data());
    } else
#endif
    {
      blend_rows_portable(upper_.data(), lower_.data(), tap.weight, count, rgbx_row_.data(), 0);
    }
    std::uint8_t* row = out + static_cast<std::size_t>(y) * out_width * 3;
    if (vector) {
      rgbx_to_rgb(rgbx_row_.data(), out_width, 1, false, row);
    } else {
      rgbx_to_rgb_portable(rgbx_row_.data(), out_width, 1, false, row);
    }
  }
}

void RgbxResizer::resize_to_rgb(const std::uint8_t* rgbx, int width, int height, std::size_t stride, int out_width,
                                int out_height, bool flip, std::uint8_t* out) {
  run(rgbx, width, height, stride, out_width, out_height, flip, out, cpu_has_ssse3());
}

void RgbxResizer::resize_to_rgb_portable(const std::uint8_t* rgbx, int width, int height, std::size_t stride,
                                         int out_width, int out_height, bool flip, std::uint8_t* out) {
  run(rgbx, width, height, stride, out_width, out_height, flip, out, false);
}

}  // namespace tensorcom::imaging
