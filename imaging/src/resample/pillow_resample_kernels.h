// Internal to pillow_resample: the vector loops of the two passes, for x86
// CPUs with SSE4.1 or AVX2 (cpu_features.h says which this build has and
// the CPU can run). Each gives the portable loops' bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensorcom::imaging {
class ResampleAxis;
}

namespace tensorcom::imaging::kernels {

// Pillow keeps 8 bits for the result and 2 for overflow (bicubic weights
// can be negative or sum past one): 32 - 8 - 2 fraction bits.
inline constexpr int kPrecisionBits = 22;
// How ResampleAxis splits a weight for 16-bit multiply-adds.
inline constexpr int kLowBits = 11;
inline constexpr std::int32_t kLowMask = (1 << kLowBits) - 1;

// One row of the horizontal pass: x.out_count() RGBX outputs into dst from
// `row`, whose first pixel is the axis' pixel `origin`.
void horizontal_sse41(const ResampleAxis& x, const std::uint8_t* row, int origin, std::uint8_t* dst);
void horizontal_avx2(const ResampleAxis& x, const std::uint8_t* row, int origin, std::uint8_t* dst);
// Two rows at once (the weights serve both): rows a and b into dst_a, dst_b.
void horizontal_avx2_rows(const ResampleAxis& x, const std::uint8_t* row_a, const std::uint8_t* row_b, int origin,
                          std::uint8_t* dst_a, std::uint8_t* dst_b);

// The same, writing RGB (the padding dropped), mirrored if flip: rows of
// 3 * x.out_count() bytes and 16 of slack.
void horizontal_avx2_rows_rgb(const ResampleAxis& x, const std::uint8_t* row_a, const std::uint8_t* row_b, int origin,
                              bool flip, std::uint8_t* dst_a, std::uint8_t* dst_b);

// Output row j of the vertical pass: `pixels` RGBX outputs into dst, from
// the horizontal pass' rows row_bytes apart, the first of y's taps at top.
// dst has 32 bytes of slack.
void vertical_sse41(const std::uint8_t* top, std::size_t row_bytes, const ResampleAxis& y, int j, int pixels,
                    std::uint8_t* dst);
void vertical_avx2(const std::uint8_t* top, std::size_t row_bytes, const ResampleAxis& y, int j, int pixels,
                   std::uint8_t* dst);
// The same on `bytes` bytes of any layout (each channel of each pixel is a
// sum of its own), into dst without slack. REQUIRES: bytes >= 32.
void vertical_avx2_bytes(const std::uint8_t* top, std::size_t row_bytes, const ResampleAxis& y, int j,
                         std::size_t bytes, std::uint8_t* dst);

}  // namespace tensorcom::imaging::kernels
