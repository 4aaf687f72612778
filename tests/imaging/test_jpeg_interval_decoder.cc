// The interval decoder: libjpeg's coefficients (so its pixels) from any
// entropy-coded data, corrupt, cut short or without restart markers.
#include <doctest/doctest.h>

#include "jpeg_test_images.h"

using namespace tensorcom::imaging;
using namespace tensorcom::imaging::testing;

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

TEST_CASE("one interval decoder from image to image: tables kept from the last image only when they are the same") {
  // The standard tables (libjpeg's default) recur from image to image and
  // are kept; tables made for an image differ from the next image's.
  auto image = [](int width, int height, Encoding e, unsigned seed, bool optimize) {
    e.optimize_huffman = optimize;
    return encode(width, height, e, seed);
  };
  const std::vector<std::vector<std::byte>> images = {
      image(203, 157, {3, 2, 2, 1, 0, false}, 1, false), image(160, 120, {3, 2, 2, 1, 0, false}, 2, true),
      image(203, 157, {3, 2, 2, 1, 0, false}, 3, true),  image(120, 96, {3, 1, 1, 1, 0, false}, 4, false),
      image(96, 80, {1, 1, 1, 1, 0, false}, 5, true),    image(203, 157, {3, 2, 2, 1, 0, false}, 6, false)};
  JpegRegionDecoder decoder;
  std::vector<std::byte> headers, unstuffed;
  std::vector<ByteRange> intervals;
  std::vector<std::uint8_t> buffer;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < images.size(); ++i) {
      CAPTURE(round);
      CAPTURE(i);
      const JpegInfo info = decoder.read_header(images[i]);
      const PixelBox box{info.width / 4, info.height / 5, info.width / 2, info.height / 2};
      const auto slice = slice_restart_intervals(images[i], box, decoder_context(8), headers, &intervals, &unstuffed);
      REQUIRE(slice);
      (void)decoder.read_header(headers);
      const JpegRegion r =
          decoder.decode(box.x - slice->x, box.y - slice->y, box.width, box.height, 8, buffer, intervals, unstuffed);
      std::vector<std::uint8_t> pixels;
      for (int y = 0; y < r.height; ++y) {
        const std::uint8_t* row = r.pixels + static_cast<std::size_t>(y) * r.stride;
        pixels.insert(pixels.end(), row, row + static_cast<std::size_t>(r.width) * 4);
      }
      CHECK(pixels == whole_box(images[i], box, 8));
    }
  }
  CHECK(decoder.interval_decodes() == 2 * images.size());
}
