// IEEE 754 binary16 ("half", DType::kFloat16): C++ has no portable type for
// it, so tensors store its bits as uint16_t and these convert them.
#pragma once

#include <cstdint>

namespace tensorcom {

// Returns: the half nearest to value, ties to even; values beyond the largest
//   half (65504) round to infinity as IEEE does, NaN stays NaN (keeping the
//   top 10 bits of its payload).
[[nodiscard]] std::uint16_t float_to_half(float value) noexcept;

// Returns: the half's value as a float, exactly (every half is a float),
//   NaN payloads included: float_to_half(half_to_float(h)) == h for every h.
[[nodiscard]] float half_to_float(std::uint16_t half) noexcept;

}  // namespace tensorcom
