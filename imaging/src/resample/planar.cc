#include "tensorcom/imaging/planar.h"

#include "resample/cpu_features.h"

namespace tensorcom::imaging {

namespace {

void split_pixels(const std::uint8_t* pixels, std::size_t from, std::size_t count, int channels, std::uint8_t* planes) {
  for (int k = 0; k < channels; ++k) {
    std::uint8_t* plane = planes + static_cast<std::size_t>(k) * count;
    for (std::size_t i = from; i < count; ++i) plane[i] = pixels[i * channels + k];
  }
}

#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
// One plane's 16 bytes from three 16-byte loads, each shuffled into place.
__attribute__((target("ssse3"))) inline __m128i gather(__m128i a, __m128i b, __m128i c, __m128i from_a, __m128i from_b,
                                                       __m128i from_c) {
  return _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, from_a), _mm_shuffle_epi8(b, from_b)),
                      _mm_shuffle_epi8(c, from_c));
}

// Sixteen RGB pixels (48 bytes, three loads) a step.
__attribute__((target("ssse3"))) void rgb_to_planar_ssse3(const std::uint8_t* pixels, std::size_t count,
                                                          std::uint8_t* planes) {
  constexpr char z = -1;  // a shuffle index that yields 0
  const __m128i r_from_a = _mm_setr_epi8(0, 3, 6, 9, 12, 15, z, z, z, z, z, z, z, z, z, z);
  const __m128i r_from_b = _mm_setr_epi8(z, z, z, z, z, z, 2, 5, 8, 11, 14, z, z, z, z, z);
  const __m128i r_from_c = _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, z, 1, 4, 7, 10, 13);
  const __m128i g_from_a = _mm_setr_epi8(1, 4, 7, 10, 13, z, z, z, z, z, z, z, z, z, z, z);
  const __m128i g_from_b = _mm_setr_epi8(z, z, z, z, z, 0, 3, 6, 9, 12, 15, z, z, z, z, z);
  const __m128i g_from_c = _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, z, 2, 5, 8, 11, 14);
  const __m128i b_from_a = _mm_setr_epi8(2, 5, 8, 11, 14, z, z, z, z, z, z, z, z, z, z, z);
  const __m128i b_from_b = _mm_setr_epi8(z, z, z, z, z, 1, 4, 7, 10, 13, z, z, z, z, z, z);
  const __m128i b_from_c = _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, 0, 3, 6, 9, 12, 15);
  std::uint8_t* red = planes;
  std::uint8_t* green = planes + count;
  std::uint8_t* blue = planes + 2 * count;
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const std::uint8_t* p = pixels + 3 * i;
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(red + i), gather(a, b, c, r_from_a, r_from_b, r_from_c));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(green + i), gather(a, b, c, g_from_a, g_from_b, g_from_c));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(blue + i), gather(a, b, c, b_from_a, b_from_b, b_from_c));
  }
  split_pixels(pixels, i, count, 3, planes);
}
#endif

}  // namespace

void interleaved_to_planar_portable(const std::uint8_t* pixels, std::size_t count, int channels, std::uint8_t* planes) {
  split_pixels(pixels, 0, count, channels, planes);
}

void interleaved_to_planar(const std::uint8_t* pixels, std::size_t count, int channels, std::uint8_t* planes) {
#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
  if (channels == 3 && cpu_has_ssse3()) {
    rgb_to_planar_ssse3(pixels, count, planes);
    return;
  }
#endif
  interleaved_to_planar_portable(pixels, count, channels, planes);
}

}  // namespace tensorcom::imaging
