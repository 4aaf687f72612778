// libFuzzer target: cutting restart intervals out of JPEGs (shards come from
// anywhere). The first 8 bytes choose the box, the rest is the file; a slice
// that comes out is decoded too, so what the slicer writes must be a JPEG
// libjpeg can read or refuse cleanly. The slice (or, when none comes out,
// the whole file) is decoded twice, by libjpeg alone and with
// JpegIntervalDecoder doing the Huffman decoding: the two must give the same
// pixels, or fail alike (a differential test: a difference aborts, unless
// libjpeg disagrees with itself on the file). A slice is also cut as the
// augmenter cuts it, headers only with its intervals unstuffed apart, which
// only JpegIntervalDecoder reads: it must give what the whole slice gives.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tensorcom/imaging/augmenter.h"
#include "jpeg/jpeg_region.h"
#include "jpeg/jpeg_restart_slice.h"

using namespace tensorcom::imaging;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  auto field = [&](int i) { return (data[2 * i] << 8) | data[2 * i + 1]; };
  std::span<const std::byte> jpeg(reinterpret_cast<const std::byte*>(data + 8), size - 8);
  static JpegRegionDecoder decoder;
  JpegInfo info;
  try {
    info = decoder.read_header(jpeg);
  } catch (const ImageError&) {
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
  // Without a slice, the whole file: JpegIntervalDecoder takes a scan
  // without restart markers as one interval.
  const std::span<const std::byte> decoded = slice ? std::span<const std::byte>(slice_bytes) : jpeg;
  const PixelBox origin = slice ? *slice : PixelBox{};
  // The box's pixels, or empty if the decode failed; *warned says whether
  // libjpeg warned of damaged data.
  auto decode = [&](bool ours, std::span<const ByteRange> with, bool* warned = nullptr,
                    std::span<const std::byte> file = {}, std::span<const std::byte> unstuffed = {}) {
    std::vector<std::uint8_t> buffer, pixels;
    try {
      decoder.decode_whole_scans_with_libjpeg(!ours);
      (void)decoder.read_header(file.empty() ? decoded : file);
      const JpegRegion r =
          decoder.decode(box.x - origin.x, box.y - origin.y, box.width, box.height, num, buffer, with, unstuffed);
      for (int y = 0; y < r.height; ++y) {
        const std::uint8_t* row = r.pixels + static_cast<std::size_t>(y) * r.stride;
        pixels.insert(pixels.end(), row, row + static_cast<std::size_t>(r.width) * 4);
      }
    } catch (const ImageError&) {
      pixels.clear();
    }
    if (warned) *warned = decoder.warnings() > 0;
    return pixels;
  };
  bool damaged = false;
  const std::vector<std::uint8_t> by_libjpeg = decode(false, {}, &damaged);
  const std::vector<std::uint8_t> ours =
      decode(true, slice ? std::span<const ByteRange>(intervals) : std::span<const ByteRange>());
  // libjpeg-turbo 2.1 is not its own reference everywhere, and there the
  // two are not compared:
  //  - on data it warns about, it can give different pixels from one decode
  //    to the next (memory it never wrote, read after a skip);
  //  - fill bytes before a stuffed zero (FF FF 00, not allowed in scan data)
  //    read as a marker to its fast Huffman path, whose fallback to the slow
  //    path keeps the coefficients the fast one wrote meanwhile: its answer
  //    then depends on how much input it had buffered. JpegIntervalDecoder
  //    gives the slow path's.
  // (The unit tests compare the two on damaged data where libjpeg is steady.)
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(decoded.data());
  const bool fill_bytes = std::search_n(bytes, bytes + decoded.size(), 2, std::uint8_t{0xFF}) != bytes + decoded.size();
  if (ours != by_libjpeg && !damaged && !fill_bytes && decode(false, {}) == by_libjpeg) std::abort();
  if (slice) {
    std::vector<std::byte> headers, unstuffed;
    std::vector<ByteRange> unstuffed_intervals;
    const auto same =
        slice_restart_intervals(jpeg, box, decoder_context(num), headers, &unstuffed_intervals, &unstuffed);
    if (!same || same->x != slice->x || same->y != slice->y) std::abort();
    bool warned = false;
    const std::vector<std::uint8_t> from_unstuffed = decode(true, unstuffed_intervals, &warned, headers, unstuffed);
    // (On damaged data libjpeg's own steps may read memory it never wrote.)
    if (from_unstuffed != ours && !damaged && !warned) std::abort();
  }
  return 0;
}
