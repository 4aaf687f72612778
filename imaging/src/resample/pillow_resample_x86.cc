// The vector loops of Pillow's two resampling passes. Sums are exact
// integers, as in Pillow, so every path gives the same bits:
//  - SSE4.1: 32-bit products of pixels and 22-bit weights, one pixel's four
//    channels at a time (pmulld is slow, but exact);
//  - AVX2: 16-bit multiply-adds (vpmaddwd) on the weights split as
//    hi * 2^11 + lo, so two taps go into each 32-bit lane and sixteen lanes
//    into two instructions; the two sums meet once per output.
#include "resample/pillow_resample.h"
#include "resample/pillow_resample_kernels.h"

#include "resample/cpu_features.h"

#ifdef TENSORCOM_HAVE_X86_SIMD_PATH

#include <algorithm>
#include <cstring>

namespace tensorcom::imaging::kernels {
namespace {

constexpr std::int32_t kHalf = std::int32_t{1} << (kPrecisionBits - 1);

// Four channels of one pixel in 32-bit lanes.
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

}  // namespace

__attribute__((target("sse4.1"))) void horizontal_sse41(const ResampleAxis& x, const std::uint8_t* row, int origin,
                                                        std::uint8_t* dst) {
  const __m128i half = _mm_set1_epi32(kHalf);
  for (int i = 0; i < x.out_count(); ++i) {
    const std::int32_t* w = x.weights(i);
    const std::uint8_t* px = row + static_cast<std::size_t>(x.first(i) - origin) * 4;
    __m128i sum = half;
    for (int t = 0; t < x.taps(i); ++t, px += 4) {
      sum = _mm_add_epi32(sum, _mm_mullo_epi32(widen_pixel(px), _mm_set1_epi32(w[t])));
    }
    const std::int32_t out = narrow_pixel(sum);
    std::memcpy(dst + 4 * i, &out, 4);
  }
}

__attribute__((target("sse4.1"))) void vertical_sse41(const std::uint8_t* top, std::size_t row_bytes,
                                                      const ResampleAxis& y, int j, int pixels, std::uint8_t* dst) {
  const std::int32_t* w = y.weights(j);
  const int taps = y.taps(j);
  const __m128i half = _mm_set1_epi32(kHalf);
  int i = 0;
  // Four output pixels at a time: one row of weights serves a whole row.
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
    for (int t = 0; t < taps; ++t, px += row_bytes)
      sum = _mm_add_epi32(sum, _mm_mullo_epi32(widen_pixel(px), _mm_set1_epi32(w[t])));
    const std::int32_t out = narrow_pixel(sum);
    std::memcpy(dst + 4 * static_cast<std::size_t>(i), &out, 4);
  }
}

namespace {

// The exact sum from the split sums: (hi << 11) + lo + one half, then the
// fraction bits dropped.
__attribute__((target("avx2"))) inline __m256i join_sums(__m256i hi, __m256i lo) {
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, kLowBits), lo), _mm256_set1_epi32(kHalf));
  return _mm256_srai_epi32(sum, kPrecisionBits);
}

}  // namespace

namespace {

// Output i of a horizontal pass: sum(p * w) + half for its four channels.
// Each group's four pixels are loaded into both 128-bit lanes and shuffled
// into 16-bit pairs by channel, zero-extended in the same step: lane 0
// holds (R0,R1) (G0,G1) (B0,B1) (X0,X1), lane 1 the same of pixels 2 and 3,
// matching the group's weights (w0,w1) and (w2,w3).
__attribute__((target("avx2"))) inline __m128i horizontal_sum(const ResampleAxis& x, int i, int groups,
                                                              const std::uint8_t* row, int origin, __m256i by_channel) {
  const std::uint8_t* px = row + static_cast<std::size_t>(x.window_first(i) - origin) * 4;
  const std::int32_t* w = x.window_weights(i);
  // Lane 0 takes the group's first weight pair, lane 1 its second.
  const __m256i hi_pairs = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
                lo_pairs = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
  __m256i hi = _mm256_setzero_si256(), lo = _mm256_setzero_si256();
  for (int g = 0; g < groups; ++g, px += 16, w += ResampleAxis::kGroupInts) {
    const __m256i four = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(px)));
    const __m256i pairs = _mm256_shuffle_epi8(four, by_channel);
    const __m256i weights = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(pairs, _mm256_permutevar8x32_epi32(weights, hi_pairs)));
    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(pairs, _mm256_permutevar8x32_epi32(weights, lo_pairs)));
  }
  // The split sums meet lane by lane ((hi << 11) + lo is each lane's exact
  // part of the sum, so adding lanes afterwards changes nothing), then the
  // two lanes.
  const __m256i both = _mm256_add_epi32(_mm256_slli_epi32(hi, kLowBits), lo);
  const __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(both), _mm256_extracti128_si256(both, 1));
  return _mm_add_epi32(sum, _mm_set1_epi32(kHalf));
}

}  // namespace

__attribute__((target("avx2"))) void horizontal_avx2(const ResampleAxis& x, const std::uint8_t* row, int origin,
                                                     std::uint8_t* dst) {
  if (!x.has_windows()) return horizontal_sse41(x, row, origin, dst);
  constexpr char z = -128;  // pshufb writes a zero byte
  const __m256i by_channel = _mm256_setr_epi8(0, z, 4, z, 1, z, 5, z, 2, z, 6, z, 3, z, 7, z,  //
                                              8, z, 12, z, 9, z, 13, z, 10, z, 14, z, 11, z, 15, z);
  const int groups = x.window() / ResampleAxis::kGroupPixels;
  int i = 0;
  // Four outputs at a time share the packing into bytes.
  for (; i + 4 <= x.out_count(); i += 4) {
    const __m128i a = _mm_srai_epi32(horizontal_sum(x, i, groups, row, origin, by_channel), kPrecisionBits);
    const __m128i b = _mm_srai_epi32(horizontal_sum(x, i + 1, groups, row, origin, by_channel), kPrecisionBits);
    const __m128i c = _mm_srai_epi32(horizontal_sum(x, i + 2, groups, row, origin, by_channel), kPrecisionBits);
    const __m128i d = _mm_srai_epi32(horizontal_sum(x, i + 3, groups, row, origin, by_channel), kPrecisionBits);
    const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4 * static_cast<std::size_t>(i)), bytes);
  }
  for (; i < x.out_count(); ++i) {
    const std::int32_t out = narrow_pixel(horizontal_sum(x, i, groups, row, origin, by_channel));
    std::memcpy(dst + 4 * static_cast<std::size_t>(i), &out, 4);
  }
}

namespace {

// Output i of two rows at once, lane 0 row a, lane 1 row b: sum(p * w) for
// its four channels, fraction bits dropped. Each lane's four pixels are
// shuffled twice into 16-bit pairs by channel, zero-extended: (p0,p1) then
// (p2,p3), against the group's weight pairs broadcast to both lanes, so the
// lanes never need adding together.
template <int kGroups>  // 0: as many as the axis' window has
__attribute__((target("avx2"))) inline __m256i horizontal_sum_rows(const ResampleAxis& x, int i, int window_groups,
                                                                   const std::uint8_t* row_a, const std::uint8_t* row_b,
                                                                   int origin) {
  const int groups = kGroups ? kGroups : window_groups;
  constexpr char z = -128;                                                                // pshufb writes a zero byte
  const __m256i first = _mm256_setr_epi8(0, z, 4, z, 1, z, 5, z, 2, z, 6, z, 3, z, 7, z,  //
                                         0, z, 4, z, 1, z, 5, z, 2, z, 6, z, 3, z, 7, z);
  const __m256i second = _mm256_setr_epi8(8, z, 12, z, 9, z, 13, z, 10, z, 14, z, 11, z, 15, z,  //
                                          8, z, 12, z, 9, z, 13, z, 10, z, 14, z, 11, z, 15, z);
  const std::size_t offset = static_cast<std::size_t>(x.window_first(i) - origin) * 4;
  const std::uint8_t* a = row_a + offset;
  const std::uint8_t* b = row_b + offset;
  const std::int32_t* w = x.window_weights(i);
  __m256i hi = _mm256_setzero_si256(), lo = _mm256_setzero_si256();
  for (int g = 0; g < groups; ++g, a += 16, b += 16, w += ResampleAxis::kGroupInts) {
    const __m256i both =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
    const __m256i p01 = _mm256_shuffle_epi8(both, first), p23 = _mm256_shuffle_epi8(both, second);
    hi = _mm256_add_epi32(hi, _mm256_add_epi32(_mm256_madd_epi16(p01, _mm256_set1_epi32(w[0])),
                                               _mm256_madd_epi16(p23, _mm256_set1_epi32(w[1]))));
    lo = _mm256_add_epi32(lo, _mm256_add_epi32(_mm256_madd_epi16(p01, _mm256_set1_epi32(w[2])),
                                               _mm256_madd_epi16(p23, _mm256_set1_epi32(w[3]))));
  }
  return join_sums(hi, lo);
}

}  // namespace

namespace {

// Where the two-row horizontal pass puts its outputs: `four` takes outputs
// i..i+3 of both rows as bytes (lane 0 row a's RGBX, lane 1 row b's), `one`
// output i of each as an RGBX word.
struct RgbxRows {
  std::uint8_t* a;
  std::uint8_t* b;

  [[nodiscard]] static bool right_to_left() { return false; }
  __attribute__((target("avx2"))) void four(int i, __m256i bytes) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a + 4 * static_cast<std::size_t>(i)), _mm256_castsi256_si128(bytes));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + 4 * static_cast<std::size_t>(i)),
                     _mm256_extracti128_si256(bytes, 1));
  }
  void one(int i, std::int32_t pa, std::int32_t pb) const {
    std::memcpy(a + 4 * static_cast<std::size_t>(i), &pa, 4);
    std::memcpy(b + 4 * static_cast<std::size_t>(i), &pb, 4);
  }
};

// RGB without the padding byte, mirrored if asked (output i of n goes to
// n - 1 - i). Each store writes four bytes past its pixels, which the next
// store covers: outputs go left to right in memory (right to left in i when
// mirrored), and rows have 16 bytes of slack for the last.
struct RgbRows {
  std::uint8_t* a;
  std::uint8_t* b;
  int last;  // out_count - 1 when mirrored, else -1
  __m256i order;

  __attribute__((target("avx2"))) RgbRows(std::uint8_t* a, std::uint8_t* b, int out_count, bool flip)
      : a(a), b(b), last(flip ? out_count - 1 : -1) {
    constexpr char z = -128;
    order = flip ? _mm256_setr_epi8(12, 13, 14, 8, 9, 10, 4, 5, 6, 0, 1, 2, z, z, z, z,  //
                                    12, 13, 14, 8, 9, 10, 4, 5, 6, 0, 1, 2, z, z, z, z)
                 : _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, z, z, z, z,  //
                                    0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, z, z, z, z);
  }
  [[nodiscard]] bool right_to_left() const { return last >= 0; }
  [[nodiscard]] std::size_t at(int i, int count) const {
    return 3 * static_cast<std::size_t>(last >= 0 ? last - (i + count - 1) : i);
  }
  __attribute__((target("avx2"))) void four(int i, __m256i bytes) const {
    const __m256i rgb = _mm256_shuffle_epi8(bytes, order);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a + at(i, 4)), _mm256_castsi256_si128(rgb));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + at(i, 4)), _mm256_extracti128_si256(rgb, 1));
  }
  void one(int i, std::int32_t pa, std::int32_t pb) const {
    std::memcpy(a + at(i, 1), &pa, 4);
    std::memcpy(b + at(i, 1), &pb, 4);
  }
};

// Outputs i..i+3 of both rows: the packs keep lanes apart, so lane 0 ends
// as row a's four pixels and lane 1 as row b's.
template <int kGroups, class Rows>
__attribute__((target("avx2"))) inline void horizontal_four(const ResampleAxis& x, int i, int groups,
                                                            const std::uint8_t* row_a, const std::uint8_t* row_b,
                                                            int origin, const Rows& out) {
  const __m256i v01 = _mm256_packs_epi32(horizontal_sum_rows<kGroups>(x, i, groups, row_a, row_b, origin),
                                         horizontal_sum_rows<kGroups>(x, i + 1, groups, row_a, row_b, origin));
  const __m256i v23 = _mm256_packs_epi32(horizontal_sum_rows<kGroups>(x, i + 2, groups, row_a, row_b, origin),
                                         horizontal_sum_rows<kGroups>(x, i + 3, groups, row_a, row_b, origin));
  out.four(i, _mm256_packus_epi16(v01, v23));
}

template <int kGroups, class Rows>
__attribute__((target("avx2"))) inline void horizontal_one(const ResampleAxis& x, int i, int groups,
                                                           const std::uint8_t* row_a, const std::uint8_t* row_b,
                                                           int origin, const Rows& out) {
  const __m256i v = horizontal_sum_rows<kGroups>(x, i, groups, row_a, row_b, origin);
  const __m256i packed = _mm256_packus_epi16(_mm256_packs_epi32(v, v), v);
  out.one(i, _mm256_extract_epi32(packed, 0), _mm256_extract_epi32(packed, 4));
}

// The pass over both rows, for windows of kGroups groups (0: any).
template <int kGroups, class Rows>
__attribute__((target("avx2"))) void horizontal_rows(const ResampleAxis& x, const std::uint8_t* row_a,
                                                     const std::uint8_t* row_b, int origin, const Rows& out) {
  const int groups = x.window() / ResampleAxis::kGroupPixels;
  const int whole = x.out_count() / 4 * 4;
  if (!out.right_to_left()) {
    for (int i = 0; i < whole; i += 4) horizontal_four<kGroups>(x, i, groups, row_a, row_b, origin, out);
    for (int i = whole; i < x.out_count(); ++i) horizontal_one<kGroups>(x, i, groups, row_a, row_b, origin, out);
  } else {
    for (int i = x.out_count() - 1; i >= whole; --i) horizontal_one<kGroups>(x, i, groups, row_a, row_b, origin, out);
    for (int i = whole - 4; i >= 0; i -= 4) horizontal_four<kGroups>(x, i, groups, row_a, row_b, origin, out);
  }
}

// Windows of one or two groups (up to eight taps) are nearly all of a
// RandomResizedCrop's: their loops unrolled, with no count to test.
template <class Rows>
__attribute__((target("avx2"))) void horizontal_rows_any(const ResampleAxis& x, const std::uint8_t* row_a,
                                                         const std::uint8_t* row_b, int origin, const Rows& out) {
  switch (x.window() / ResampleAxis::kGroupPixels) {
    case 1: return horizontal_rows<1>(x, row_a, row_b, origin, out);
    case 2: return horizontal_rows<2>(x, row_a, row_b, origin, out);
    default: return horizontal_rows<0>(x, row_a, row_b, origin, out);
  }
}

}  // namespace

__attribute__((target("avx2"))) void horizontal_avx2_rows(const ResampleAxis& x, const std::uint8_t* row_a,
                                                          const std::uint8_t* row_b, int origin, std::uint8_t* dst_a,
                                                          std::uint8_t* dst_b) {
  if (!x.has_windows()) {
    horizontal_sse41(x, row_a, origin, dst_a);
    horizontal_sse41(x, row_b, origin, dst_b);
    return;
  }
  horizontal_rows_any(x, row_a, row_b, origin, RgbxRows{dst_a, dst_b});
}

__attribute__((target("avx2"))) void horizontal_avx2_rows_rgb(const ResampleAxis& x, const std::uint8_t* row_a,
                                                              const std::uint8_t* row_b, int origin, bool flip,
                                                              std::uint8_t* dst_a, std::uint8_t* dst_b) {
  horizontal_rows_any(x, row_a, row_b, origin, RgbRows(dst_a, dst_b, x.out_count(), flip));
}

namespace {

// 32 bytes of output row j of the vertical pass, from the bytes at px of
// the first row its taps read: two source rows a step, interleaving their
// bytes makes the 16-bit pairs (row t, row t+1) of each byte.
__attribute__((target("avx2"), always_inline)) inline __m256i vertical_block(const std::uint8_t* px,
                                                                             std::size_t row_bytes,
                                                                             const std::int32_t* pairs, int taps) {
  const __m256i zero = _mm256_setzero_si256();
  __m256i hi[4] = {zero, zero, zero, zero}, lo[4] = {zero, zero, zero, zero};
  for (int t = 0; t < taps; t += 2, px += 2 * row_bytes) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(px));
    const __m256i b = t + 1 < taps ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(px + row_bytes)) : zero;
    const __m256i whi = _mm256_set1_epi32(pairs[t]), wlo = _mm256_set1_epi32(pairs[t + 1]);
    const __m256i ab_lo = _mm256_unpacklo_epi8(a, b), ab_hi = _mm256_unpackhi_epi8(a, b);
    // Per 128-bit lane: bytes 0-3, 4-7, 8-11, 12-15 of the lane's sixteen.
    const __m256i p[4] = {_mm256_unpacklo_epi8(ab_lo, zero), _mm256_unpackhi_epi8(ab_lo, zero),
                          _mm256_unpacklo_epi8(ab_hi, zero), _mm256_unpackhi_epi8(ab_hi, zero)};
    for (int k = 0; k < 4; ++k) {
      hi[k] = _mm256_add_epi32(hi[k], _mm256_madd_epi16(p[k], whi));
      lo[k] = _mm256_add_epi32(lo[k], _mm256_madd_epi16(p[k], wlo));
    }
  }
  // Packs work within lanes, so lane 0 ends as bytes 0..15, lane 1 as 16..31.
  const __m256i p01 = _mm256_packs_epi32(join_sums(hi[0], lo[0]), join_sums(hi[1], lo[1]));
  const __m256i p23 = _mm256_packs_epi32(join_sums(hi[2], lo[2]), join_sums(hi[3], lo[3]));
  return _mm256_packus_epi16(p01, p23);
}

}  // namespace

__attribute__((target("avx2"))) void vertical_avx2(const std::uint8_t* top, std::size_t row_bytes,
                                                   const ResampleAxis& y, int j, int pixels, std::uint8_t* dst) {
  const std::int32_t* pairs = y.tap_pairs(j);
  const int taps = y.taps(j);
  int i = 0;
  for (; i + 8 <= pixels; i += 8) {
    const std::size_t at = 4 * static_cast<std::size_t>(i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + at), vertical_block(top + at, row_bytes, pairs, taps));
  }
  if (i < pixels) {
    // The last few: the 32-bit loops on what is left of the row.
    vertical_sse41(top + 4 * static_cast<std::size_t>(i), row_bytes, y, j, pixels - i,
                   dst + 4 * static_cast<std::size_t>(i));
  }
}

__attribute__((target("avx2"))) void vertical_avx2_bytes(const std::uint8_t* top, std::size_t row_bytes,
                                                         const ResampleAxis& y, int j, std::size_t bytes,
                                                         std::uint8_t* dst) {
  const std::int32_t* pairs = y.tap_pairs(j);
  const int taps = y.taps(j);
  for (std::size_t at = 0;; at += 32) {
    // The last step ends at the row's end, over bytes done already: each
    // byte is a sum of its own, so they come out the same.
    at = std::min(at, bytes - 32);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + at), vertical_block(top + at, row_bytes, pairs, taps));
    if (at + 32 == bytes) return;
  }
}

}  // namespace tensorcom::imaging::kernels

#endif  // TENSORCOM_HAVE_X86_SIMD_PATH
