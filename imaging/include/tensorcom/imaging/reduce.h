// Reduced-resolution copies of JPEGs, for shards that cost fewer decoding
// cores per GPU (make-shards --max-side): a JPEG whose longer side exceeds
// max_side is resized with Pillow's antialiased filter (the augmenter's
// resampler, exact where it decodes at full scale) so that its longer side
// is max_side, and encoded again by libjpeg-turbo. Smaller JPEGs, and files
// of other formats, are left as they are. A training run on the reduced
// files sees torchvision's transforms applied to those files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "tensorcom/codec/byte_buffer.h"
#include "tensorcom/imaging/augmenter.h"

namespace tensorcom::imaging {

struct ReduceOptions {
  int max_side = 512;            // the longer side of a reduced image
  int quality = 90;              // libjpeg quality of the new encoding, 1..100
  bool restart_markers = false;  // written directly, a marker after every MCU
  // Huffman tables made for each image: files a few percent smaller, but
  // every image then brings tables its decoder must build, where the
  // standard tables (the default, as cameras, OpenCV and FFCV's writer
  // use) are built once a thread: small images decode about 2% faster.
  bool optimize_huffman = false;
  Resample filter = Resample::kBicubic;               // kBilinear or kBicubic (Pillow's antialiased filters)
  std::uint64_t max_pixels = std::uint64_t{1} << 28;  // larger sources are refused (kTooManyPixels)
};

// The longer side scaled to max_side, the other in proportion (rounded,
// at least 1). REQUIRES: width, height, max_side > 0.
[[nodiscard]] Size reduced_size(int width, int height, int max_side);

// One per thread: keeps its decoder and buffers.
class ImageReducer {
 public:
  // Throws ArgumentError for options out of range.
  explicit ImageReducer(ReduceOptions options);

  // The reduced JPEG, or nothing when the image is left as it is (not a
  // JPEG, or no side over max_side). Throws ImageError for a JPEG that
  // cannot be decoded.
  [[nodiscard]] std::optional<ByteBuffer> reduce(std::span<const std::byte> image);

  [[nodiscard]] const ReduceOptions& options() const noexcept { return options_; }

 private:
  ReduceOptions options_;
  ImageAugmenter augmenter_;
  std::vector<std::uint8_t> pixels_;  // the resized image, reused
};

}  // namespace tensorcom::imaging
