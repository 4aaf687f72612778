#include "resample/rgbx_to_rgb.h"

#include <cstddef>

#include "resample/cpu_features.h"

namespace tensorcom::imaging {

namespace {

void copy_pixels(const std::uint8_t* in, int width, bool flip, int from, std::uint8_t* row) {
  for (int c = from; c < width; ++c) {
    const std::uint8_t* px = in + 4 * (flip ? width - 1 - c : c);
    row[3 * c] = px[0];
    row[3 * c + 1] = px[1];
    row[3 * c + 2] = px[2];
  }
}

#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
// Four pixels at a time: one shuffle keeps bytes 0-2 of each (in reverse
// pixel order when mirroring) and one 16-byte store writes 12 useful bytes;
// the other 4 are overwritten next, so stores stop 16 bytes before the row's end.
__attribute__((target("ssse3"))) void rgbx_to_rgb_ssse3(const std::uint8_t* rgbx, int width, int height, bool flip,
                                                        std::uint8_t* out) {
  const __m128i keep = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m128i keep_mirrored = _mm_setr_epi8(12, 13, 14, 8, 9, 10, 4, 5, 6, 0, 1, 2, -1, -1, -1, -1);
  const __m128i order = flip ? keep_mirrored : keep;
  for (int r = 0; r < height; ++r) {
    const std::uint8_t* in = rgbx + static_cast<std::size_t>(r) * width * 4;
    std::uint8_t* row = out + static_cast<std::size_t>(r) * width * 3;
    int c = 0;
    for (; c + 4 <= width && 3 * c + 16 <= 3 * width; c += 4) {
      const std::uint8_t* src = in + 4 * (flip ? width - 4 - c : c);
      __m128i px = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row + 3 * c), _mm_shuffle_epi8(px, order));
    }
    copy_pixels(in, width, flip, c, row);
  }
}
#endif

}  // namespace

void rgbx_to_rgb_portable(const std::uint8_t* rgbx, int width, int height, bool flip, std::uint8_t* out) {
  for (int r = 0; r < height; ++r) {
    copy_pixels(rgbx + static_cast<std::size_t>(r) * width * 4, width, flip, 0,
                out + static_cast<std::size_t>(r) * width * 3);
  }
}

void rgbx_to_rgb(const std::uint8_t* rgbx, int width, int height, bool flip, std::uint8_t* out) {
#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
  if (cpu_has_ssse3()) {
    rgbx_to_rgb_ssse3(rgbx, width, height, flip, out);
    return;
  }
#endif
  rgbx_to_rgb_portable(rgbx, width, height, flip, out);
}

}  // namespace tensorcom::imaging
