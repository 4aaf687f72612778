// libFuzzer target: make-shards --restart-markers, the lossless rewrite of a
// JPEG with a restart marker after every MCU, and --max-side's reduction
// (images come from anywhere).
// The input is laid out as the image seeds are: 8 bytes (the first chooses a
// small or the default pixel limit), then the file. A file is rewritten or
// refused with a FormatError; what was written must be readable by libjpeg
// again (rewritten a second time without complaint). A reduction gives
// nothing, a JPEG of at most max_side a side that libjpeg reads, or an
// Error.
#include <cstddef>
#include <cstdint>

#include "tensorcom/codec/error.h"
#include "tensorcom/imaging/reduce.h"
#include "tensorcom/imaging/restart_markers.h"

namespace {

void reduce(std::span<const std::byte> jpeg, std::uint64_t max_pixels) {
  tensorcom::imaging::ImageReducer reducer({.max_side = 16, .restart_markers = true, .max_pixels = max_pixels});
  std::optional<tensorcom::ByteBuffer> reduced;
  try {
    reduced = reducer.reduce(jpeg);
  } catch (const tensorcom::Error&) {
    return;
  }
  if (!reduced) return;
  tensorcom::imaging::ImageAugmenter reader({}, 1);
  const auto size = reader.read_size(*reduced);  // throws, and so fails the run, if unreadable
  if (size.width > 16 || size.height > 16) __builtin_trap();
  (void)tensorcom::imaging::with_restart_markers(*reduced, max_pixels);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  std::span<const std::byte> jpeg(reinterpret_cast<const std::byte*>(data + 8), size - 8);
  // The default limit allows 2**28 pixels: too much memory for the fuzzer.
  const std::uint64_t max_pixels = (data[0] & 1) ? 4096 : std::uint64_t{1} << 22;
  tensorcom::ByteBuffer once;
  try {
    once = tensorcom::imaging::with_restart_markers(jpeg, max_pixels);
  } catch (const tensorcom::FormatError&) {
    return 0;
  }
  reduce(jpeg, max_pixels);
  try {
    (void)tensorcom::imaging::with_restart_markers(once, max_pixels);
  } catch (const tensorcom::FormatError&) {
    __builtin_trap();  // libjpeg wrote a file it cannot read
  }
  return 0;
}
