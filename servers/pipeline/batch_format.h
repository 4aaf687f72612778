// What a served batch looks like: images (uint8 BHWC by default, as the
// reference sends; optionally BCHW and/or float16/float32 normalised with
// mean and std), int32 labels (B,), and optionally a msgpack metadata tensor.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensorcom/codec/batch_layout.h"
#include "tensorcom/codec/tensor.h"

namespace tensorcom::pipeline {

enum class PixelType { kUInt8, kFloat16, kFloat32 };

struct BatchFormat {
  int size = 224;                           // image height and width
  std::size_t batch_size = 32;              // images per batch
  ImageLayout layout = ImageLayout::kBHWC;  // kBHWC or kBCHW
  PixelType pixels = PixelType::kUInt8;
  // Float outputs are (x / 255 - mean) / std per RGB channel (ImageNet's by default).
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
  bool metadata = false;  // add the "meta" tensor (keys, shards, server, sequence)

  [[nodiscard]] DType dtype() const noexcept;
  [[nodiscard]] std::size_t image_bytes() const noexcept;  // one image in the output format
  // Whether augmented uint8 HWC pixels can be written straight into the batch.
  [[nodiscard]] bool direct() const noexcept { return layout == ImageLayout::kBHWC && pixels == PixelType::kUInt8; }
  // The images tensor's shape for n images.
  [[nodiscard]] Shape image_shape(std::int64_t n) const;
};

// Writes one augmented uint8 HWC image into dst in the batch's format.
// Throws ArgumentError for a float format whose mean or std channel_affine refuses.
void convert_image(const BatchFormat& format, const std::uint8_t* hwc, std::byte* dst);

// RandomErasing on a float image in the batch's format: the box's values
// become 0, or N(0, 1) noise from noise_seed when given, as torchvision's
// erase() on the normalised tensor. uint8 formats are left as they are.
void erase_image(const BatchFormat& format, std::byte* dst, const std::array<std::int32_t, 4>& box,
                 std::optional<std::uint64_t> noise_seed);

}  // namespace tensorcom::pipeline
