// PNG, PNM, BMP and WebP through OpenCV's imdecode (JPEG-only builds refuse
// them): the declared size is checked before decoding, then the whole image
// is decoded and the transform applied to it.
#pragma once

#include <opencv2/core.hpp>

#include "decoders/image_decoder.h"

namespace tensorcom::imaging {

class OpenCvDecoder final : public ImageDecoder {
 public:
  explicit OpenCvDecoder(DecodeContext& context) : context_(context) {}

  [[nodiscard]] bool can_decode(ImageFormat format) const noexcept override {
    return format != ImageFormat::kJpeg && format != ImageFormat::kUnknown;
  }
  [[nodiscard]] Size open(std::span<const std::byte> encoded) override;
  void render(std::span<const std::byte> encoded, const Transform& t, std::uint8_t* out) override;
  void decode_whole(std::span<const std::byte> encoded, std::uint8_t* out) override;

 private:
  DecodeContext& context_;
  cv::Mat image_;  // the image last opened, as OpenCV decoded it
  PillowAxes axes_;
};

}  // namespace tensorcom::imaging
