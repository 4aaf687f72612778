// JPEGs, the fast way (docs/jpeg.md): the header gives the size, then only
// the source pixels the resampling filter reads are decoded, at the smallest
// DCT scale that leaves enough shrinking to the filter, and a JPEG with
// restart markers is first cut to the intervals those pixels lie in.
#pragma once

#include <random>
#include <vector>

#include "decoders/image_decoder.h"
#include "jpeg/jpeg_region.h"
#include "jpeg/jpeg_restart_slice.h"
#include "resample/rgbx_resize.h"

namespace tensorcom::imaging {

class JpegDecoder final : public ImageDecoder {
 public:
  explicit JpegDecoder(DecodeContext& context) : context_(context) {}

  [[nodiscard]] bool can_decode(ImageFormat format) const noexcept override { return format == ImageFormat::kJpeg; }
  [[nodiscard]] Size open(std::span<const std::byte> encoded) override;
  void render(std::span<const std::byte> encoded, const Transform& t, std::uint8_t* out) override;
  void decode_whole(std::span<const std::byte> encoded, std::uint8_t* out) override;

  // The source pixels transform t's output covers, decoded at the DCT scale
  // Resample::kFast would use, RGBX, in memory kept until the next call
  // (ImageAugmenter::decode_jpeg_crop). REQUIRES: the image was opened.
  [[nodiscard]] JpegRegion decode_crop(std::span<const std::byte> encoded, const Transform& t);

  [[nodiscard]] const ImageAugmenter::JpegCounts& counts() const noexcept { return counts_; }

 private:
  class ResamplerRows;
  JpegRegion decode_box(std::span<const std::byte> encoded, const PixelBox& box, int num,
                        ResamplerRows* rows = nullptr);

  DecodeContext& context_;
  Size image_;                              // the size of the image last opened
  JpegRegionDecoder jpeg_;                  // reused from image to image
  std::vector<std::uint8_t> region_;        // the decoded crop box, reused between samples
  RgbxResizer resizer_;                     // kFast: the box to the output, resized, mirrored, RGB
  PillowAxes axes_;                         // Pillow's plan for the current image, memory reused
  std::vector<std::byte> slice_;            // the headers of a JPEG with restart markers cut to the box's rows
  std::vector<ByteRange> slice_intervals_;  // where the slice's restart intervals lie in slice_unstuffed_
  std::vector<std::byte> slice_unstuffed_;  // their bytes, unstuffed (the slice holds its headers only)
  ImageAugmenter::JpegCounts counts_;
};

}  // namespace tensorcom::imaging
