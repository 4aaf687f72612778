// One way of turning encoded bytes into the pixels a transform asks for, as
// DALI's imgcodec decoders are: can_decode() says whether it takes a format,
// open() reads what it needs to know the image's size, and render() decodes
// only what the transform's output covers. The augmenter keeps one of each
// and hands an image to the first that can decode its format; each keeps
// its memory between images (one set per thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

#include "resample/pillow_resample.h"
#include "tensorcom/imaging/augmenter.h"
#include "tensorcom/imaging/format.h"
#include "tensorcom/imaging/geometry.h"

namespace tensorcom::imaging {

// What every decoder shares: the options, the resampler that gives
// torchvision's pixels, and the time spent decoding.
struct DecodeContext {
  explicit DecodeContext(const AugmentOptions& options) : options(options) {}

  // Refuses an image of zero size, or of more than options.max_pixels.
  // Throws ImageError.
  void check_pixels(std::uint64_t width, std::uint64_t height) const;
  [[nodiscard]] ResampleFilter filter() const noexcept {
    return options.resample == Resample::kBicubic ? ResampleFilter::kBicubic : ResampleFilter::kBilinear;
  }

  const AugmentOptions& options;
  PillowResampler pillow;  // Pillow's resize, as torchvision on PIL
  std::chrono::steady_clock::duration decode_time{};
};

class ImageDecoder {
 public:
  virtual ~ImageDecoder() = default;

  [[nodiscard]] virtual bool can_decode(ImageFormat format) const noexcept = 0;
  // Reads enough of the image to know its size (a JPEG its header; other
  // formats the whole image, kept for render()) and checks it against the
  // pixel limit. Throws ImageError.
  [[nodiscard]] virtual Size open(std::span<const std::byte> encoded) = 0;
  // Writes transform t of the image last opened (the same bytes) to out:
  // t.output() pixels, RGB. REQUIRES: t fits the image. Throws ImageError.
  virtual void render(std::span<const std::byte> encoded, const Transform& t, std::uint8_t* out) = 0;
  // Writes the whole image last opened to out, RGB (width * height * 3
  // bytes). Throws ImageError.
  virtual void decode_whole(std::span<const std::byte> encoded, std::uint8_t* out) = 0;
};

// Pillow's two resampling axes for transform t's crop of a width x height
// image decoded at scale num/8, and where the axes' pixel 0 lies in the
// decoded image.
struct PillowAxes {
  ResampleAxis x;
  ResampleAxis y;
  int origin_x = 0;
  int origin_y = 0;

  // Plans both axes (memory reused from plan to plan).
  void plan(ResampleFilter filter, Size image, const Transform& t, int num);
};

}  // namespace tensorcom::imaging
