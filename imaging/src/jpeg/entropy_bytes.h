// Internal: the bytes of a JPEG's entropy-coded data, as the restart slicer
// and the interval decoder walk them.
//
// Restart markers every MCU and stuffed zeros put an 0xFF every 50 to 100
// bytes of a photo's scan; both stop at each. A memchr (and memcpy) call
// per stop costs more than the search itself; these are inlined and read
// 16 bytes a step with SSE2, which every x86-64 CPU has. See docs/jpeg.md,
// "The bytes of entropy-coded data".
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tensorcom::imaging {

// Bit i set where p[i] is 0xFF, for the n <= 64 bytes from p.
inline std::uint64_t ff_mask_short(const std::uint8_t* p, std::size_t n) noexcept {
  std::uint64_t mask = 0;
  for (std::size_t i = 0; i < n; ++i) mask |= static_cast<std::uint64_t>(p[i] == 0xFF) << i;
  return mask;
}

// The same for the 64 bytes from p. A scan walks its
// markers and stuffed bytes from a mask a block: one compare a 64 bytes, one
// branch an 0xFF, where a search per 0xFF restarts its vector loop and
// mispredicts its exit each time.
inline std::uint64_t ff_mask64(const std::uint8_t* p) noexcept {
#if defined(__SSE2__)
  const __m128i ff = _mm_set1_epi8(static_cast<char>(0xFF));
  std::uint64_t mask = 0;
  for (int i = 0; i < 4; ++i) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i));
    mask |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, ff)))) << (16 * i);
  }
  return mask;
#else
  return ff_mask_short(p, 64);
#endif
}

// Calls on_ff(offset) for each 0xFF in [begin, end) of data, in order,
// until it returns false; returns whether it never did.
template <class OnFF>
inline bool for_each_ff(const std::uint8_t* data, std::size_t begin, std::size_t end, OnFF&& on_ff) {
  for (std::size_t base = begin; base < end; base += 64) {
    std::uint64_t mask = end - base >= 64 ? ff_mask64(data + base) : ff_mask_short(data + base, end - base);
    for (; mask != 0; mask &= mask - 1) {
      if (!on_ff(base + static_cast<std::size_t>(__builtin_ctzll(mask)))) return false;
    }
  }
  return true;
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

// From the byte after an 0xFF of entropy-coded data: moves in past the 00
// of a stuffed 0xFF (true), or to a marker or the end (false), past the
// fill bytes 0xFF before a marker.
inline bool skip_stuffed_zero(const std::uint8_t*& in, const std::uint8_t* end) noexcept {
  while (in < end && *in == 0xFF) ++in;
  if (in == end || *in != 0x00) return false;
  ++in;
  return true;
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
    if (!skip_stuffed_zero(in, end)) return out;  // a marker, or the end
    *out++ = 0xFF;
  }
}

// unstuff for a caller whose buffers have room to spare: it may read up to
// 15 bytes past end and write up to 16 past what it returns. Without a byte
// loop at each stop, it costs about half as much on short intervals.
inline std::uint8_t* unstuff_wide(const std::uint8_t* in, const std::uint8_t* end, std::uint8_t* out) noexcept {
#if defined(__SSE2__)
  const __m128i ff = _mm_set1_epi8(static_cast<char>(0xFF));
  while (in < end) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), v);
    const auto n = static_cast<unsigned>(std::min<std::ptrdiff_t>(16, end - in));
    const unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, ff))) & ((1u << n) - 1);
    if (mask == 0) {
      in += n;
      out += n;
      continue;
    }
    const int at = __builtin_ctz(mask);
    in += at + 1;
    out += at;                                    // the 0xFF, stored already
    if (!skip_stuffed_zero(in, end)) return out;  // a marker, or the end
    ++out;
  }
  return out;
#else
  return unstuff(in, end, out);
#endif
}

// Zero bytes after each unstuffed interval: the Huffman decoder's bit
// reader loads eight bytes at a time and reads zeros past the data, as
// libjpeg gives once a segment's data are used up.
inline constexpr std::size_t kUnstuffedPadding = 8;

}  // namespace tensorcom::imaging
