// Cutting a crop's restart intervals out of a JPEG: the slice decodes to the
// same pixels as the whole file, for every chroma layout and restart
// spacing that allows slicing; other files are left alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <jpeglib.h>

#include "tensorcom/imaging/augmenter.h"
#include "jpeg/jpeg_region.h"
#include "jpeg/jpeg_restart_slice.h"
#include "libjpeg_encode.h"

using namespace tensorcom::imaging;

namespace {

struct Encoding {
  int components = 3;
  int h_samp = 2, v_samp = 2;  // of the luma component; chroma is 1x1
  int restart_mcus = 0;        // restart interval in MCUs
  int restart_rows = 0;        // or in MCU rows
  bool progressive = false;
};

// A noisy, textured test image encoded with libjpeg as asked.
std::vector<std::byte> encode(int width, int height, const Encoding& e, unsigned seed = 1) {
  auto configure = [&](jpeg_compress_struct& cinfo) {
    if (e.components == 3) {
      cinfo.comp_info[0].h_samp_factor = e.h_samp;
      cinfo.comp_info[0].v_samp_factor = e.v_samp;
    }
    cinfo.restart_interval = static_cast<unsigned>(e.restart_mcus);
    cinfo.restart_in_rows = e.restart_rows;
    if (e.progressive) jpeg_simple_progression(&cinfo);
  };
  std::mt19937 rng(seed);
  auto fill_row = [&](int y, unsigned char* row) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < e.components; ++c) {
        int v = (x * (c + 1) * 3 + y * (3 - c) * 2) % 256 + static_cast<int>(rng() % 40) - 20;
        row[x * e.components + c] = static_cast<unsigned char>(std::clamp(v, 0, 255));
      }
    }
  };
  return testing::libjpeg_encode(width, height, e.components, e.components == 1 ? JCS_GRAYSCALE : JCS_RGB, 90,
                                 configure, fill_row);
}

// The box's pixels at scale num/8, decoded by the region decoder from
// `jpeg`, whose top-left corner is at `origin` of the image.
// Who does the Huffman decoding: libjpeg, or JpegIntervalDecoder (given
// the slice's intervals, or on the whole scan of a file without restart
// markers), which then must have.
enum class Huffman { kLibjpeg, kOurs };

// `unstuffed`: where the intervals lie when jpeg is a headers-only slice.
std::vector<std::uint8_t> decode_box(std::span<const std::byte> jpeg, const PixelBox& origin, const PixelBox& box,
                                     int num, Huffman huffman = Huffman::kLibjpeg,
                                     std::span<const ByteRange> intervals = {},
                                     std::span<const std::byte> unstuffed = {}) {
  JpegRegionDecoder decoder;
  decoder.decode_whole_scans_with_libjpeg(huffman == Huffman::kLibjpeg);
  (void)decoder.read_header(jpeg);
  std::vector<std::uint8_t> buffer;
  JpegRegion r = decoder.decode(box.x - origin.x, box.y - origin.y, box.width, box.height, num, buffer,
                                huffman == Huffman::kOurs ? intervals : std::span<const ByteRange>(), unstuffed);
  CHECK(decoder.interval_decodes() == (huffman == Huffman::kOurs ? 1u : 0u));
  // The decoded box in the whole image's scaled pixels (origin is a
  // multiple of 8: of num/8 it is whole).
  r.x += origin.x * num / 8;
  r.y += origin.y * num / 8;
  REQUIRE(r.x == box.x * num / 8);
  REQUIRE(r.y == box.y * num / 8);
  std::vector<std::uint8_t> pixels;
  for (int y = 0; y < r.height; ++y) {
    const std::uint8_t* row = r.pixels + static_cast<std::size_t>(y) * r.stride;
    pixels.insert(pixels.end(), row, row + static_cast<std::size_t>(r.width) * 4);
  }
  return pixels;
}

// The same pixels cut from a decode of the whole image at scale num/8: the
// box rounded outwards, as the region decoder rounds it.
std::vector<std::uint8_t> whole_box(const std::vector<std::byte>& jpeg, const PixelBox& box, int num) {
  int width = 0, height = 0;
  const std::vector<std::uint8_t> whole = testing::libjpeg_decode_whole(jpeg, num, &width, &height);
  const int x0 = box.x * num / 8, y0 = box.y * num / 8;
  const int x1 = std::max(std::min((box.x + box.width) * num / 8 + ((box.x + box.width) * num % 8 != 0), width), x0 + 1);
  const int y1 = std::max(std::min((box.y + box.height) * num / 8 + ((box.y + box.height) * num % 8 != 0), height), y0 + 1);
  std::vector<std::uint8_t> pixels;
  for (int y = y0; y < y1; ++y) {
    const std::uint8_t* row = whole.data() + (static_cast<std::size_t>(y) * width + x0) * 4;
    pixels.insert(pixels.end(), row, row + static_cast<std::size_t>(x1 - x0) * 4);
  }
  return pixels;
}

PixelBox random_box(std::mt19937& rng, int width, int height) {
  PixelBox box;
  box.width = 1 + static_cast<int>(rng() % static_cast<unsigned>(width));
  box.height = 1 + static_cast<int>(rng() % static_cast<unsigned>(height));
  box.x = static_cast<int>(rng() % static_cast<unsigned>(width - box.width + 1));
  box.y = static_cast<int>(rng() % static_cast<unsigned>(height - box.height + 1));
  return box;
}

void check_slices_decode_exactly(const std::vector<std::byte>& jpeg, int width, int height, bool expect_columns) {
  std::mt19937 rng(7);
  int sliced = 0, narrower = 0;
  std::vector<std::byte> slice_bytes;
  std::vector<ByteRange> intervals;
  for (int i = 0; i < 60; ++i) {
    const PixelBox box = random_box(rng, width, height);
    const int num = 8 >> (i % 4);  // every DCT scale the augmenter uses
    CAPTURE(box.x);
    CAPTURE(box.y);
    CAPTURE(box.width);
    CAPTURE(box.height);
    CAPTURE(num);
    auto slice = slice_restart_intervals(jpeg, box, decoder_context(num), slice_bytes, &intervals);
    if (!slice) continue;
    ++sliced;
    if (slice->width < width) ++narrower;
    CHECK(slice->x <= box.x);
    CHECK(slice->y <= box.y);
    CHECK(slice->x + slice->width >= box.x + box.width);
    CHECK(slice->y + slice->height >= box.y + box.height);
    JpegRegionDecoder probe;
    JpegInfo info = probe.read_header(slice_bytes);
    CHECK(info.width == slice->width);
    CHECK(info.height == slice->height);
    const std::vector<std::uint8_t> whole = whole_box(jpeg, box, num);
    CHECK(decode_box(slice_bytes, *slice, box, num) == whole);
    CHECK(decode_box(slice_bytes, *slice, box, num, Huffman::kOurs, intervals) == whole);
    // The same slice as headers and unstuffed intervals (the augmenter's).
    std::vector<std::byte> headers, unstuffed;
    std::vector<ByteRange> unstuffed_intervals;
    auto same = slice_restart_intervals(jpeg, box, decoder_context(num), headers, &unstuffed_intervals, &unstuffed);
    REQUIRE(same);
    CHECK(same->x == slice->x);
    CHECK(same->width == slice->width);
    CHECK(headers.size() < slice_bytes.size());
    CHECK(decode_box(headers, *same, box, num, Huffman::kOurs, unstuffed_intervals, unstuffed) == whole);
  }
  CHECK(sliced > 20);
  CHECK((narrower > 0) == expect_columns);
}

// The chroma layouts tested: 4:2:0, 4:2:2, 4:4:4, 4:4:0 and greyscale.
struct Layout {
  int components, h, v;
};
constexpr Layout kLayouts[] = {{3, 2, 2}, {3, 2, 1}, {3, 1, 1}, {3, 1, 2}, {1, 1, 1}};

}  // namespace

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

TEST_CASE("the interval decoder gives libjpeg's pixels from corrupt entropy-coded data too") {
  // Bytes of the intervals overwritten (markers and stuffed bytes left
  // alone): invalid codes, runs past the block's end, intervals that end
  // early or run on. Both decoders must make the same of them.
  const auto jpeg = encode(203, 157, Encoding{3, 2, 2, 1, 0, false}, 5);
  std::vector<std::byte> slice_bytes;
  std::vector<ByteRange> intervals;
  const PixelBox box{40, 30, 120, 100};
  std::mt19937 rng(3);
  int checked = 0, corrupted = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int num = 8 >> (trial % 4);
    auto slice = slice_restart_intervals(jpeg, box, decoder_context(num), slice_bytes, &intervals);
    REQUIRE(slice);
    const std::vector<std::uint8_t> clean = decode_box(slice_bytes, *slice, box, num);
    auto* b = reinterpret_cast<unsigned char*>(slice_bytes.data());
    for (int n = 0; n < 1 + trial % 8; ++n) {
      const ByteRange r = intervals[rng() % intervals.size()];
      if (r.end == r.begin) continue;
      const std::uint32_t at = r.begin + static_cast<std::uint32_t>(rng() % (r.end - r.begin));
      if (b[at] == 0xFF || (at > 0 && b[at - 1] == 0xFF)) continue;
      b[at] = static_cast<unsigned char>(rng() % 0xFF);  // never 0xFF: no new markers
    }
    CAPTURE(trial);
    const std::vector<std::uint8_t> by_libjpeg = decode_box(slice_bytes, *slice, box, num);
    CHECK(decode_box(slice_bytes, *slice, box, num, Huffman::kOurs, intervals) == by_libjpeg);
    ++checked;
    if (by_libjpeg != clean) ++corrupted;
  }
  CHECK(checked == 60);
  CHECK(corrupted > 40);  // the damage shows
}

TEST_CASE("the interval decoder gives libjpeg's pixels from a damaged or cut file without restart markers") {
  // One interval, the whole scan: once its bits are used up (a file cut
  // short, an EOI written early), libjpeg leaves the remaining MCUs zero.
  const auto jpeg = encode(203, 157, Encoding{3, 2, 2, 0, 0, false}, 9);
  const PixelBox box{10, 20, 180, 130};
  std::mt19937 rng(4);
  int corrupted = 0;
  const std::vector<std::uint8_t> clean = decode_box(jpeg, PixelBox{}, box, 8);
  for (int trial = 0; trial < 40; ++trial) {
    auto damaged = jpeg;
    auto* b = reinterpret_cast<unsigned char*>(damaged.data());
    const std::size_t scan = damaged.size() / 3;  // well inside the entropy-coded data
    if (trial % 4 == 0) {
      // An end of image in the middle of the data: the rest reads as zeros.
      const std::size_t at = scan + rng() % (damaged.size() - scan - 4);
      b[at] = 0xFF;
      b[at + 1] = 0xD9;
    } else {
      for (int n = 0; n < trial % 6 + 1; ++n) {
        const std::size_t at = scan + rng() % (damaged.size() - scan - 2);
        if (b[at] == 0xFF || b[at - 1] == 0xFF) continue;
        b[at] = static_cast<unsigned char>(rng() % 0xFF);
      }
    }
    CAPTURE(trial);
    const std::vector<std::uint8_t> by_libjpeg = decode_box(damaged, PixelBox{}, box, 8);
    CHECK(decode_box(damaged, PixelBox{}, box, 8, Huffman::kOurs) == by_libjpeg);
    if (by_libjpeg != clean) ++corrupted;
  }
  CHECK(corrupted > 30);
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

TEST_CASE("the augmenter gives the same images from a file with restart markers as from one without") {
  // The same coefficients either way: restart markers change only how they are coded.
  auto plain = encode(320, 240, {3, 2, 2, 0, 0, false}, 3);
  auto restarts = encode(320, 240, {3, 2, 2, 1, 0, false}, 3);
  ImageAugmenter augmenter{AugmentOptions{}, 224};
  std::vector<std::uint8_t> a(224 * 224 * 3), b(224 * 224 * 3);
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng_a(seed), rng_b(seed);
    augmenter.augment(plain, rng_a, a.data());
    augmenter.augment(restarts, rng_b, b.data());
    CHECK(a == b);
  }
}
