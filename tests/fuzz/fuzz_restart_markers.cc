// libFuzzer target: make-shards --restart-markers, the lossless rewrite of a
// JPEG with a restart marker after every MCU (images come from anywhere).
// The input is laid out as the image seeds are: 8 bytes (the first chooses a
// small or the default pixel limit), then the file. A file is rewritten or
// refused with a FormatError; what was written must be readable by libjpeg
// again (rewritten a second time without complaint).
#include <cstddef>
#include <cstdint>

#include "tensorcom/imaging/restart_markers.h"
#include "tensorcom/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  std::span<const std::byte> jpeg(reinterpret_cast<const std::byte*>(data + 8), size - 8);
  // The default limit allows 2**28 pixels: too much memory for the fuzzer.
  const std::uint64_t max_pixels = (data[0] & 1) ? 4096 : std::uint64_t{1} << 22;
  tensorcom::formats::ByteBuffer once;
  try {
    once = tensorcom::imaging::with_restart_markers(jpeg, max_pixels);
  } catch (const tensorcom::FormatError&) {
    return 0;
  }
  try {
    (void)tensorcom::imaging::with_restart_markers(once, max_pixels);
  } catch (const tensorcom::FormatError&) {
    __builtin_trap();  // libjpeg wrote a file it cannot read
  }
  return 0;
}
