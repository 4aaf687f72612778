// Decodes one encoded image and applies torchvision's transforms to it,
// writing RGB uint8 pixels (HWC): RandomResizedCrop + RandomHorizontalFlip
// (training) or Resize + CenterCrop (validation), or any explicit Transform
// (geometry.h). The bytes tell the format (format.h).
//
// JPEGs take the fast paths: the crop is chosen from the header, then only
// the pixels the resampling filter reads are decoded, at the smallest DCT
// scale that leaves enough shrinking to the filter; a JPEG with restart
// markers is first cut to the intervals those pixels lie in. PNG, PNM, BMP
// and WebP go through OpenCV. Greyscale, CMYK, progressive and 16-bit
// images all come out RGB uint8. docs/jpeg.md describes the JPEG paths.
//
// One ImageAugmenter per thread: it keeps its decoder and scratch memory.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string_view>

#include "tensorcom/imaging/auto_augment.h"
#include "tensorcom/imaging/color_jitter.h"
#include "tensorcom/imaging/random_erasing.h"
#include "tensorcom/imaging/geometry.h"
#include "tensorcom/imaging/problem.h"
#include "tensorcom/codec/metadata.h"

namespace tensorcom::imaging {

// How a crop becomes the output's pixels.
enum class Resample {
  kFast,      // decode at the smallest DCT scale that keeps the output's pixels, 2-tap bilinear (OpenCV's INTER_LINEAR)
  kBilinear,  // Pillow's antialiased BILINEAR: torchvision's pixels
  kBicubic,   // Pillow's BICUBIC
};

// "bilinear", "bicubic" or "fast"; nothing for any other name.
[[nodiscard]] std::optional<Resample> parse_resample(std::string_view name) noexcept;

struct AugmentOptions {
  bool validation = false;  // Resize + CenterCrop instead of RandomResizedCrop + flip
  ResizeSpec resize;        // validation's Resize; unset: the shorter side to round(side * 256 / 224)
  Resample resample = Resample::kBilinear;
  RandomResizedCropOptions crop;                      // training crop
  double flip_probability = 0.5;                      // horizontal flip (training only)
  std::uint64_t max_pixels = std::uint64_t{1} << 28;  // larger images are refused (kTooManyPixels)
  // Training: a policy applied to the crop after the flip (its operations
  // recorded in last_geometry().ops); unset: none.
  std::optional<AutoAugmentOptions> auto_augment;
  // Training, after the policy: ColorJitter, then RandomGrayscale.
  std::optional<ColorJitterOptions> color_jitter;
  double grayscale_probability = 0;
  // Training, last: RandomErasing's box, drawn and recorded in
  // last_geometry().erase; the pixels are left as they are (see
  // random_erasing.h).
  std::optional<RandomErasingOptions> erasing;
};

class ImageAugmenter {
 public:
  // Writes output.width x output.height images. Throws ArgumentError
  // unless both are positive.
  ImageAugmenter(AugmentOptions options, Size output);
  ImageAugmenter(AugmentOptions options, int size) : ImageAugmenter(options, Size{size, size}) {}
  ~ImageAugmenter();
  ImageAugmenter(ImageAugmenter&&) noexcept;
  ImageAugmenter& operator=(ImageAugmenter&&) noexcept;

  // Decodes, draws the transform from rng (training) and applies it, then
  // the augmentation policy if any (its draws from rng after the crop's);
  // writes output().width * output().height * 3 bytes to out.
  // Throws ImageError, or ArgumentError where a validation CenterCrop is
  // larger than the resized image (torchvision pads it: the caller's to do).
  void augment(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out);

  // Decodes and applies `transform`, whatever the options say of the
  // geometry (the resampling filter and pixel limit still apply); writes
  // transform.output() pixels to out. Throws ImageError for the image, and
  // ArgumentError for a transform that does not fit the image (its crop
  // outside it, its window outside the resized crop).
  void render(std::span<const std::byte> encoded, const Transform& transform, std::uint8_t* out);

  // The transform augment() applies to a width x height image, drawn from
  // rng as augment() draws it.
  [[nodiscard]] Transform draw_transform(int width, int height, std::mt19937_64& rng) const;

  // The whole image, RGB: `output` is called once with its size and returns
  // where to write width * height * 3 bytes. Throws ImageError.
  Size decode(std::span<const std::byte> encoded, const std::function<std::uint8_t*(Size)>& output);

  // The image's dimensions from its header, checked against max_pixels.
  // Throws ImageError.
  [[nodiscard]] Size read_size(std::span<const std::byte> encoded) const;

  // How the last sample augment() or render() made was cut: the source
  // pixels its output covers, flip and source size, and the policy's
  // operations (augment() only).
  [[nodiscard]] const SampleGeometry& last_geometry() const noexcept;

  [[nodiscard]] const AugmentOptions& options() const noexcept;
  [[nodiscard]] Size output() const noexcept;

  // JPEGs decoded so far: how many were cut to their crop's restart
  // intervals, out of all of them (the rest were entropy-decoded from the top).
  struct JpegCounts {
    std::uint64_t sliced = 0;
    std::uint64_t total = 0;
  };
  [[nodiscard]] JpegCounts jpeg_counts() const noexcept;
  // Time spent decoding so far (entropy decoding and IDCT of JPEGs, OpenCV's
  // decoding of other formats): what augment() took beyond it went to
  // cropping, resizing and flipping. For the servers' per-stage metrics.
  [[nodiscard]] std::chrono::steady_clock::duration decode_time() const noexcept;

  // The first half of augment() for a JPEG: draws the transform (the flip
  // goes to *flip) and decodes the source pixels its output covers at the
  // DCT scale kFast would use, RGBX (CMYK already converted), in memory kept
  // until the next call. For benchmarks that separate decoding from
  // resizing. Throws ImageError.
  struct DecodedCrop {
    const std::uint8_t* rgbx;
    int width;
    int height;
    std::size_t stride;
  };
  [[nodiscard]] DecodedCrop decode_jpeg_crop(std::span<const std::byte> encoded, std::mt19937_64& rng, bool* flip);

  class Engine;  // the decoders, resamplers and their memory (augmenter.cc)

 private:
  std::unique_ptr<Engine> engine_;
};

// Sets OpenCV's process-wide state for augmentation workers: no thread pool
// of its own (one image per worker is the parallelism) and no log lines of
// its own (bad images are counted and reported by their caller). Call once,
// before starting the workers.
void configure_opencv_for_workers();

}  // namespace tensorcom::imaging
