// Cutting a crop's restart intervals out of a JPEG: the slice decodes to the
// same pixels as the whole file, for every chroma layout and restart
// spacing that allows slicing; other files are left alone.
#include <doctest/doctest.h>

#include "jpeg_test_images.h"

using namespace tensorcom::imaging;
using namespace tensorcom::imaging::testing;

TEST_CASE("a slice of a JPEG with a restart marker at every MCU decodes as the whole file does") {
  for (Layout l : kLayouts) {
    CAPTURE(l.components);
    CAPTURE(l.h);
    CAPTURE(l.v);
    Encoding e{l.components, l.h, l.v, 1, 0, false};
    const int width = 203, height = 157;  // partial MCUs at the right and bottom
    check_slices_decode_exactly(encode(width, height, e), width, height, true);
  }
}

TEST_CASE("a slice of a JPEG with a restart marker every MCU row or two decodes as the whole file does") {
  for (int rows : {1, 2}) {
    CAPTURE(rows);
    Encoding e{3, 2, 2, 0, rows, false};
    check_slices_decode_exactly(encode(250, 190, e), 250, 190, false);
  }
}

TEST_CASE("files that cannot be sliced are left to the whole-file decoder") {
  std::vector<std::byte> out;
  const PixelBox box{100, 100, 50, 50};
  SUBCASE("no restart markers") { CHECK_FALSE(slice_restart_intervals(encode(256, 256, {}), box, 2, out)); }
  SUBCASE("intervals that do not tile the image") {
    // 16 MCUs a row, intervals of 3: they straddle rows.
    CHECK_FALSE(slice_restart_intervals(encode(256, 256, {3, 2, 2, 3, 0, false}), box, 2, out));
  }
  SUBCASE("progressive") { CHECK_FALSE(slice_restart_intervals(encode(256, 256, {3, 2, 2, 1, 0, true}), box, 2, out)); }
  SUBCASE("a box at the top left of a row-restart file: nothing to skip") {
    CHECK_FALSE(slice_restart_intervals(encode(256, 256, {3, 2, 2, 0, 1, false}), PixelBox{0, 0, 50, 50}, 2, out));
  }
  SUBCASE("a restart marker out of sequence") {
    auto jpeg = encode(256, 256, {3, 2, 2, 1, 0, false});
    auto* b = reinterpret_cast<unsigned char*>(jpeg.data());
    for (std::size_t i = jpeg.size() / 3; i + 1 < jpeg.size(); ++i) {
      if (b[i] == 0xFF && b[i + 1] >= 0xD0 && b[i + 1] <= 0xD7) {
        b[i + 1] = static_cast<unsigned char>(0xD0 + (b[i + 1] - 0xD0 + 3) % 8);
        break;
      }
    }
    CHECK_FALSE(slice_restart_intervals(jpeg, PixelBox{200, 200, 50, 50}, 2, out));
  }
  SUBCASE("a scan that says it is not sequential") {
    // Spectral selection 0..62: libjpeg decodes it with a warning, the
    // interval decoder refuses it, so a headers-only slice could not be read.
    auto jpeg = encode(256, 256, {3, 2, 2, 1, 0, false});
    auto* b = reinterpret_cast<unsigned char*>(jpeg.data());
    std::size_t sos = 2;
    while (!(b[sos] == 0xFF && b[sos + 1] == 0xDA)) sos += 2 + (b[sos + 2] << 8 | b[sos + 3]);
    const std::size_t components = b[sos + 4];
    b[sos + 4 + 2 * components + 2] = 62;  // Se
    CHECK_FALSE(slice_restart_intervals(jpeg, PixelBox{200, 200, 50, 50}, 2, out));
  }
  SUBCASE("a file cut short before the box's intervals") {
    auto jpeg = encode(256, 256, {3, 2, 2, 1, 0, false});
    jpeg.resize(jpeg.size() / 2);
    CHECK_FALSE(slice_restart_intervals(jpeg, PixelBox{200, 200, 50, 50}, 2, out));
  }
  SUBCASE("not a JPEG") {
    std::vector<std::byte> junk(300, std::byte{0x41});
    CHECK_FALSE(slice_restart_intervals(junk, box, 2, out));
  }
}

TEST_CASE("a box that skips nothing still gives unstuffed intervals, which decode as the whole file does") {
  // The whole width from the top: a whole JPEG's slice would be the file.
  for (Encoding e : {Encoding{3, 2, 2, 1, 0, false}, Encoding{3, 2, 2, 0, 1, false}}) {
    CAPTURE(e.restart_mcus);
    const auto jpeg = encode(203, 157, e);
    const PixelBox box{0, 0, 203, 100};
    std::vector<std::byte> out, headers, unstuffed;
    std::vector<ByteRange> intervals;
    CHECK_FALSE(slice_restart_intervals(jpeg, box, 2, out));
    const auto slice = slice_restart_intervals(jpeg, box, decoder_context(8), headers, &intervals, &unstuffed);
    REQUIRE(slice);
    CHECK(slice->x == 0);
    CHECK(slice->y == 0);
    CHECK(slice->width == 203);
    CHECK(slice->height < 157);  // the rows below the box are left out
    CHECK(decode_box(headers, *slice, box, 8, Huffman::kOurs, intervals, unstuffed) == whole_box(jpeg, box, 8));
  }
}
