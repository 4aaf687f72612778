// Test images for the JPEG decoders' tests: textured JPEGs encoded by
// libjpeg with any chroma layout and restart spacing, and the region
// decoder's pixels of a box, from a whole file or a restart slice.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <jpeglib.h>

#include "jpeg/jpeg_region.h"
#include "jpeg/jpeg_restart_slice.h"
#include "libjpeg_encode.h"

namespace tensorcom::imaging::testing {

struct Encoding {
  int components = 3;
  int h_samp = 2, v_samp = 2;  // of the luma component; chroma is 1x1
  int restart_mcus = 0;        // restart interval in MCUs
  int restart_rows = 0;        // or in MCU rows
  bool progressive = false;
  bool optimize_huffman = false;  // tables made for the image, else the standard ones
};

// A noisy, textured test image encoded with libjpeg as asked.
inline std::vector<std::byte> encode(int width, int height, const Encoding& e, unsigned seed = 1) {
  auto configure = [&](jpeg_compress_struct& cinfo) {
    if (e.components == 3) {
      cinfo.comp_info[0].h_samp_factor = e.h_samp;
      cinfo.comp_info[0].v_samp_factor = e.v_samp;
    }
    cinfo.restart_interval = static_cast<unsigned>(e.restart_mcus);
    cinfo.restart_in_rows = e.restart_rows;
    if (e.progressive) jpeg_simple_progression(&cinfo);
    cinfo.optimize_coding = e.optimize_huffman ? TRUE : FALSE;
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
inline std::vector<std::uint8_t> decode_box(std::span<const std::byte> jpeg, const PixelBox& origin,
                                            const PixelBox& box, int num, Huffman huffman = Huffman::kLibjpeg,
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
inline std::vector<std::uint8_t> whole_box(const std::vector<std::byte>& jpeg, const PixelBox& box, int num) {
  int width = 0, height = 0;
  const std::vector<std::uint8_t> whole = testing::libjpeg_decode_whole(jpeg, num, &width, &height);
  const int x0 = box.x * num / 8, y0 = box.y * num / 8;
  const int x1 =
      std::max(std::min((box.x + box.width) * num / 8 + ((box.x + box.width) * num % 8 != 0), width), x0 + 1);
  const int y1 =
      std::max(std::min((box.y + box.height) * num / 8 + ((box.y + box.height) * num % 8 != 0), height), y0 + 1);
  std::vector<std::uint8_t> pixels;
  for (int y = y0; y < y1; ++y) {
    const std::uint8_t* row = whole.data() + (static_cast<std::size_t>(y) * width + x0) * 4;
    pixels.insert(pixels.end(), row, row + static_cast<std::size_t>(x1 - x0) * 4);
  }
  return pixels;
}

inline PixelBox random_box(std::mt19937& rng, int width, int height) {
  PixelBox box;
  box.width = 1 + static_cast<int>(rng() % static_cast<unsigned>(width));
  box.height = 1 + static_cast<int>(rng() % static_cast<unsigned>(height));
  box.x = static_cast<int>(rng() % static_cast<unsigned>(width - box.width + 1));
  box.y = static_cast<int>(rng() % static_cast<unsigned>(height - box.height + 1));
  return box;
}

inline void check_slices_decode_exactly(const std::vector<std::byte>& jpeg, int width, int height,
                                        bool expect_columns) {
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

}  // namespace tensorcom::imaging::testing
