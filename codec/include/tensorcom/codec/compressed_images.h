// Image batches compressed for the wire: each image of a uint8 batch, BHWC
// (n, h, w, 3) or BCHW (n, 3, h, w), becomes one stream (a JPEG, or a
// lossless zstd frame of its left-predicted bytes), and the images tensor
// is sent as three tensors in its place (docs/tenbin.md, "Compressed
// images"):
//
//   uint8 (total,)  info "jpeg", "jpegchw", "zstd" or "zstdchw" (the codec,
//                   and chw for BCHW images): the streams, back to back
//   int32 (n + 1,)  info "imgoff": stream i is bytes [off[i], off[i + 1])
//   int32 (4,)      info "imgshape": the images tensor's shape
//
// The rest of the batch (labels, metadata, ...) follows unchanged. A
// receiver that does not know the extension (the Python reference) gets
// these as plain tensors; int32 needs no allow64 there.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tensorcom/codec/tensor.h"

namespace tensorcom {

inline constexpr std::string_view kJpegStreamsInfo = "jpeg";
inline constexpr std::string_view kJpegPlanarStreamsInfo = "jpegchw";
inline constexpr std::string_view kZstdStreamsInfo = "zstd";
inline constexpr std::string_view kZstdPlanarStreamsInfo = "zstdchw";
inline constexpr std::string_view kImageOffsetsInfo = "imgoff";
inline constexpr std::string_view kImageShapeInfo = "imgshape";

// How a server sends its images.
struct WireFormat {
  enum class Kind { kRaw, kJpeg, kZstd };
  Kind kind = Kind::kRaw;
  int quality = 95;         // JPEG quality, libjpeg's 1..100
  bool chroma_420 = false;  // JPEG chroma subsampled 4:2:0 (smaller), else 4:4:4
  int zstd_level = 1;       // zstd's level, 1..19: the pixels exactly, smaller as it rises

  // "raw", "jpeg:QUALITY,444|420" or "zstd:LEVEL", as parse_wire_format reads it.
  [[nodiscard]] std::string describe() const;
};

// Parses --wire's value: raw; jpeg, jpeg:Q, jpeg:Q,444, jpeg:Q,420 or
// jpeg,420 (quality 95 and 4:4:4 when not given); zstd or zstd:LEVEL
// (level 1 when not given).
// Throws ArgumentError naming what is wrong.
[[nodiscard]] WireFormat parse_wire_format(std::string_view text);

// The three tensors that carry `images` compressed, each image encoded on
// one of `threads` threads (at least 1).
// Throws ArgumentError unless images is uint8 (n, h, w, 3) or (n, 3, h, w)
// with h and w in 1..65535, for the raw format, or for streams over 2 GiB
// in all.
[[nodiscard]] TensorList compress_images(const Tensor& images, const WireFormat& format, int threads);

struct DecompressLimits {
  std::uint64_t max_bytes = std::uint64_t{4} << 30;  // decoded images' bytes in one batch at most
};

// Whether batch[index] starts a compressed-images triple.
[[nodiscard]] bool holds_compressed_images(std::span<const Tensor> batch, std::size_t index = 0) noexcept;

// The images of the compressed-images triple batch starts with (its
// offsets' length less one); nothing when it does not start with one.
[[nodiscard]] std::optional<std::uint64_t> compressed_image_count(std::span<const Tensor> batch) noexcept;

// Replaces each compressed-images triple of `batch` by the uint8 images
// tensor it declares, decoding on `threads` threads (at least 1). Memory is
// bounded by the declared shape, itself bounded by limits.
// Throws FormatError (kind kCompressedImages, naming the image and what was
// wrong) for a declared shape that is not uint8 images or over the limit,
// offsets out of order or out of range, or a stream that does not decode
// to an image of the declared size (truncated, corrupt, other dimensions
// or channels); `batch` is then left as it was.
void decompress_images(TensorList& batch, const DecompressLimits& limits, int threads);

}  // namespace tensorcom
