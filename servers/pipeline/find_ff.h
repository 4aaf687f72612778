// Internal: the next 0xFF byte of entropy-coded JPEG data.
//
// Restart markers every MCU and stuffed zeros put an 0xFF every 50 to 100
// bytes of a photo's scan; the slicer and the interval decoder stop at
// each. A call of memchr per stop cost more than the search itself (2% of
// a worker's time); this one is inlined and reads 16 bytes a step with
// SSE2, which every x86-64 CPU has.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tensorcom::pipeline {

// The first 0xFF in [p, end), or end.
inline const std::uint8_t* find_ff(const std::uint8_t* p, const std::uint8_t* end) noexcept {
#if defined(__SSE2__)
  const __m128i ff = _mm_set1_epi8(static_cast<char>(0xFF));
  for (; end - p >= 16; p += 16) {
    const auto mask = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), ff)));
    if (mask) return p + __builtin_ctz(mask);
  }
#endif
  for (; p < end; ++p) {
    if (*p == 0xFF) return p;
  }
  return end;
}

}  // namespace tensorcom::pipeline
