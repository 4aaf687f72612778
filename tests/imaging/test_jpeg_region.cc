// The region decoder: a box at a DCT scale gives the pixels a decode of the
// whole image at that scale gives, with libjpeg's Huffman decoding or ours.
#include <doctest/doctest.h>

#include "jpeg_test_images.h"

using namespace tensorcom::imaging;
using namespace tensorcom::imaging::testing;

TEST_CASE("the region decoder gives a box's pixels as a decode of the whole image does") {
  // libjpeg-turbo's cropped decoding upsamples chroma at the strip's right
  // edge as at the image's: without columns to spare, a box's last pixels
  // came out differently.
  for (Layout l : kLayouts) {
    CAPTURE(l.components);
    CAPTURE(l.h);
    CAPTURE(l.v);
    const int width = 203, height = 157;
    const auto jpeg = encode(width, height, Encoding{l.components, l.h, l.v, 0, 0, false});
    std::mt19937 rng(11);
    for (int i = 0; i < 40; ++i) {
      const PixelBox box = random_box(rng, width, height);
      const int num = 8 >> (i % 4);
      CAPTURE(box.x);
      CAPTURE(box.y);
      CAPTURE(box.width);
      CAPTURE(box.height);
      CAPTURE(num);
      const std::vector<std::uint8_t> whole = whole_box(jpeg, box, num);
      CHECK(decode_box(jpeg, PixelBox{}, box, num) == whole);
      CHECK(decode_box(jpeg, PixelBox{}, box, num, Huffman::kOurs) == whole);  // the whole scan, one interval
    }
  }
}

TEST_CASE("decoded rows never start 16-byte aligned, so libjpeg-turbo writes them through the cache") {
  // Its SIMD colour conversion writes an aligned row with non-temporal
  // stores: the resampler, reading the rows next, would fetch them from
  // memory. Whatever the buffer's own alignment, rows start 8 bytes past a
  // cache line, whole cache lines apart.
  const auto jpeg = encode(203, 157, Encoding{3, 2, 2, 0, 0, false});
  for (std::size_t reserve : {std::size_t{0}, std::size_t{1} << 20}) {
    std::vector<std::uint8_t> buffer;
    buffer.reserve(reserve);  // a fresh allocation, or one from mmap (page-aligned)
    JpegRegionDecoder decoder;
    (void)decoder.read_header(jpeg);
    const JpegRegion r = decoder.decode(0, 0, 203, 40, 8, buffer);
    CAPTURE(reserve);
    CHECK(reinterpret_cast<std::uintptr_t>(r.pixels) % 64 == 8);
    CHECK(r.stride % 64 == 0);
    CHECK(r.stride >= 203 * 4);
    struct Rows final : RowSink {
      std::vector<std::uintptr_t> starts;
      std::size_t stride = 0;
      void take_rows(const std::uint8_t* pixels, std::size_t row_stride, int, int) noexcept override {
        starts.push_back(reinterpret_cast<std::uintptr_t>(pixels));
        stride = row_stride;
      }
    } rows;
    (void)decoder.read_header(jpeg);
    (void)decoder.decode_rows(0, 0, 203, 100, 8, buffer, rows);
    REQUIRE_FALSE(rows.starts.empty());
    for (std::uintptr_t start : rows.starts) CHECK(start % 64 == 8);
    CHECK(rows.stride % 64 == 0);
  }
}
