// libFuzzer target: cutting restart intervals out of JPEGs (shards come from
// anywhere). The first 8 bytes choose the box, the rest is the file; a slice
// that comes out is decoded too, so what the slicer writes must be a JPEG
// libjpeg can read or refuse cleanly. It is decoded twice, by libjpeg alone
// and with JpegIntervalDecoder doing the Huffman decoding: the two must give
// the same pixels, or fail alike (a differential test: any difference
// aborts).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "image_augmenter.h"
#include "jpeg_region.h"
#include "jpeg_restart_slice.h"

using namespace tensorcom::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  auto field = [&](int i) { return (data[2 * i] << 8) | data[2 * i + 1]; };
  std::span<const std::byte> jpeg(reinterpret_cast<const std::byte*>(data + 8), size - 8);
  static JpegRegionDecoder decoder;
  JpegInfo info;
  try {
    info = decoder.read_header(jpeg);
  } catch (const SampleError&) {
    return 0;
  }
  if (info.width <= 0 || info.height <= 0 || static_cast<std::uint64_t>(info.width) * info.height > (1u << 22)) {
    return 0;
  }
  PixelBox box;
  box.width = 1 + field(0) % info.width;
  box.height = 1 + field(1) % info.height;
  box.x = field(2) % (info.width - box.width + 1);
  box.y = field(3) % (info.height - box.height + 1);
  std::vector<std::byte> slice_bytes;
  std::vector<ByteRange> intervals;
  const int num = 8 >> (data[0] & 3);
  auto slice = slice_restart_intervals(jpeg, box, decoder_context(num), slice_bytes, &intervals);
  if (!slice) return 0;
  // The box's pixels, or empty if the decode failed.
  auto decode = [&](std::span<const ByteRange> with) {
    std::vector<std::uint8_t> buffer, pixels;
    try {
      (void)decoder.read_header(slice_bytes);
      const JpegRegion r = decoder.decode(box.x - slice->x, box.y - slice->y, box.width, box.height, num, buffer, with);
      for (int y = 0; y < r.height; ++y) {
        const std::uint8_t* row = r.pixels + static_cast<std::size_t>(y) * r.stride;
        pixels.insert(pixels.end(), row, row + static_cast<std::size_t>(r.width) * 4);
      }
    } catch (const SampleError&) {
      pixels.clear();
    }
    return pixels;
  };
  if (decode({}) != decode(intervals)) std::abort();
  return 0;
}
