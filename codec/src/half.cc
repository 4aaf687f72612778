#include "tensorcom/codec/half.h"

#include <bit>
#include <cmath>

namespace tensorcom {

namespace {

constexpr std::uint32_t kFloatExponent = 0x7f800000u;  // all ones: infinity or NaN
constexpr std::uint32_t kHalfExponent = 0x7c00u;
constexpr std::uint32_t kHalfQuiet = 0x200u;            // the top mantissa bit of a half
constexpr std::uint32_t kSmallestNormal = 0x38800000u;  // 2^-14 as float bits
constexpr std::uint32_t kHalfOfSmallest = 0x33000000u;  // 2^-25: a tie between 0 and 2^-24
constexpr std::uint32_t kOverflow = 0x477ff000u;        // 65520: halfway from 65504 to 2^16, rounds up

// A subnormal half: the mantissa with its implicit 1, shifted into place and
// rounded to nearest even. REQUIRES kHalfOfSmallest <= magnitude < kSmallestNormal.
std::uint32_t subnormal_half(std::uint32_t magnitude) noexcept {
  const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - (magnitude >> 23);  // 14..24
  std::uint32_t half = mantissa >> shift;
  const std::uint32_t rest = mantissa & ((1u << shift) - 1);
  const std::uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;  // a carry makes the smallest normal
  return half;
}

}  // namespace

std::uint16_t float_to_half(float value) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  std::uint32_t half = 0;
  if (magnitude > kFloatExponent) {  // NaN: keep what fits of the payload, and keep it a NaN
    const std::uint32_t payload = (magnitude >> 13) & 0x3ffu;
    half = kHalfExponent | (payload != 0 ? payload : kHalfQuiet);
  } else if (magnitude >= kOverflow) {  // infinity, or rounds to it
    half = kHalfExponent;
  } else if (magnitude >= kSmallestNormal) {
    std::uint32_t rebiased = magnitude - 0x38000000u;  // exponent bias 127 -> 15
    rebiased += 0xfffu + ((rebiased >> 13) & 1u);      // round to nearest even
    half = rebiased >> 13;
  } else if (magnitude >= kHalfOfSmallest) {
    half = subnormal_half(magnitude);
  }
  return static_cast<std::uint16_t>(sign | half);
}

float half_to_float(std::uint16_t half) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | kFloatExponent | (mantissa << 13));  // inf, NaN
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

}  // namespace tensorcom
