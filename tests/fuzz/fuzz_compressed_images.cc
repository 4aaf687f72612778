// libFuzzer target: decoding compressed images (compressed_images.h). The
// input declares the batch (a byte each: n 1..4 and the codec, JPEG or zstd
// when the top bit is set; height and width 1..64),
// then where the streams after image 0 start (n - 1 little-endian uint16,
// taken as they are: out of order or out of range included), then the
// streams.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensorcom/codec/compressed_images.h"
#include "tensorcom/codec/error.h"

using namespace tensorcom;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const std::int64_t n = data[0] % 4 + 1, h = data[1] % 64 + 1, w = data[2] % 64 + 1;
  const bool zstd = (data[0] & 0x80) != 0;
  const std::size_t header = 3 + 2 * static_cast<std::size_t>(n - 1);
  if (size < header) return 0;
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(n) + 1, 0);
  for (std::int64_t i = 1; i < n; ++i) {
    const std::uint8_t* at = data + 3 + 2 * (i - 1);
    offsets[static_cast<std::size_t>(i)] = at[0] | (at[1] << 8);
  }
  data += header;
  size -= header;
  offsets.back() = static_cast<std::int32_t>(size);
  Tensor streams =
      Tensor::allocate(DType::kUInt8, {static_cast<std::int64_t>(size)}, zstd ? kZstdStreamsInfo : kJpegStreamsInfo);
  if (size > 0) std::memcpy(streams.data(), data, size);
  const std::vector<std::int32_t> shape{static_cast<std::int32_t>(n), static_cast<std::int32_t>(h),
                                        static_cast<std::int32_t>(w), 3};
  TensorList batch{streams, Tensor::from_values<std::int32_t>({n + 1}, offsets, kImageOffsetsInfo),
                   Tensor::from_values<std::int32_t>({4}, shape, kImageShapeInfo)};
  try {
    decompress_images(batch, {.max_bytes = 1 << 20}, 2);
    // Decoded: exactly the declared images.
    if (batch.size() != 1 || batch[0].shape() != Shape{n, h, w, 3}) __builtin_trap();
  } catch (const FormatError& e) {
    if (e.kind() != FormatErrorKind::kCompressedImages) __builtin_trap();
  }
  return 0;
}
