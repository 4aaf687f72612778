// Internal: the bytes of a JPEG's entropy-coded data, as the restart slicer
// and the interval decoder walk them.
//
// Restart markers every MCU and stuffed zeros put an 0xFF every 50 to 100
// bytes of a photo's scan; both stop at each. A memchr (and memcpy) call
// per stop costs more than the search itself; these are inlined and read
// 16 bytes a step with SSE2, which every x86-64 CPU has. See docs/jpeg.md,
// "The bytes of entropy-coded data".
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tensorcom::imaging {

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

// Copies bytes up to the first 0xFF (or end) to *out, which moves past
// them; returns where it stopped.
inline const std::uint8_t* copy_to_ff(const std::uint8_t* in, const std::uint8_t* end, std::uint8_t** out) noexcept {
  std::uint8_t* o = *out;
#if defined(__SSE2__)
  const __m128i ff = _mm_set1_epi8(static_cast<char>(0xFF));
  for (; end - in >= 16; in += 16, o += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o), v);  // o never runs ahead of in: the bytes fit
    const auto mask = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, ff)));
    if (mask) {
      *out = o + __builtin_ctz(mask);
      return in + __builtin_ctz(mask);
    }
  }
#endif
  while (in < end && *in != 0xFF) *o++ = *in++;
  *out = o;
  return in;
}

// Copies the entropy-coded bytes [in, end) to out without the zero that
// follows each data byte 0xFF, and ends them as libjpeg's reader ends a
// segment: at a marker (0xFF then anything but 0; fill bytes 0xFF before
// it belong to it). Returns the end of what it wrote, at most end - in
// bytes.
inline std::uint8_t* unstuff(const std::uint8_t* in, const std::uint8_t* end, std::uint8_t* out) noexcept {
  for (;;) {
    in = copy_to_ff(in, end, &out);
    if (in == end) return out;
    ++in;
    while (in < end && *in == 0xFF) ++in;
    if (in == end || *in != 0x00) return out;  // a marker, or the end
    *out++ = 0xFF;
    ++in;
  }
}

// Zero bytes after each unstuffed interval: the Huffman decoder's bit
// reader loads eight bytes at a time and reads zeros past the data, as
// libjpeg gives once a segment's data are used up.
inline constexpr std::size_t kUnstuffedPadding = 8;

}  // namespace tensorcom::imaging
