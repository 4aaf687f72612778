// Decodes one encoded image and applies the training (RandomResizedCrop +
// horizontal flip) or validation (resize + centre crop) transform, writing a
// size x size RGB uint8 image (HWC). JPEGs are decoded with libjpeg-turbo,
// choosing the crop from the header first and then decoding only that box,
// at the smallest DCT scale (1/8, 1/4, 1/2) that still has at least `size`
// pixels across; PNG, PNM, BMP and WebP go through OpenCV (other formats are
// refused: see image_header.h). Greyscale, CMYK,
// progressive and 16-bit images all come out RGB uint8.
//
// One ImageAugmenter per worker thread: it keeps its decoder and scratch memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crop.h"
#include "rgbx_resize.h"
#include "tensorcom/error.h"

namespace tensorcom::pipeline {

struct AugmentOptions {
  bool validation = false;           // resize the shorter side to size*256/224, centre crop
  RandomResizedCropOptions crop;     // training crop
  double flip_probability = 0.5;     // horizontal flip (training only)
  std::uint64_t max_pixels = std::uint64_t{1} << 28;  // larger images are refused
};

// Why a sample could not be used; reason() is a short category for counting.
class SampleError : public Error {
 public:
  SampleError(std::string reason, const std::string& detail) : Error(reason + ": " + detail), reason_(std::move(reason)) {}
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
};

class JpegRegionDecoder;

class ImageAugmenter {
 public:
  // Writes size x size images. Throws ArgumentError unless size > 0.
  ImageAugmenter(AugmentOptions options, int size);
  ~ImageAugmenter();
  ImageAugmenter(ImageAugmenter&&) noexcept;
  ImageAugmenter& operator=(ImageAugmenter&&) noexcept;

  // Decodes (the format is told by the bytes, not a name) and transforms;
  // writes size*size*3 bytes to out. Throws SampleError.
  void augment(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out);

  [[nodiscard]] const AugmentOptions& options() const noexcept { return options_; }
  [[nodiscard]] int size() const noexcept { return size_; }

  // JPEGs decoded so far: how many were cut to their crop's restart
  // intervals, out of all of them (the rest were entropy-decoded from the top).
  struct JpegCounts {
    std::uint64_t sliced = 0;
    std::uint64_t total = 0;
  };
  [[nodiscard]] JpegCounts jpeg_counts() const noexcept { return jpeg_counts_; }

  // The first half of augment() for a JPEG: draws the crop (and the flip,
  // into *flip) and decodes that box at its DCT scale, RGBX (CMYK already
  // converted), in memory kept until the next call. For benchmarks that
  // separate decoding from resizing. Throws SampleError.
  struct DecodedCrop {
    const std::uint8_t* rgbx;
    int width;
    int height;
    std::size_t stride;
  };
  [[nodiscard]] DecodedCrop decode_jpeg_crop(std::span<const std::byte> encoded, std::mt19937_64& rng, bool* flip);

 private:
  void augment_jpeg(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out);
  void augment_other(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out);
  [[nodiscard]] CropBox choose_crop(int width, int height, std::mt19937_64& rng) const;
  [[nodiscard]] bool draw_flip(std::mt19937_64& rng) const;
  void check_pixels(std::uint64_t width, std::uint64_t height) const;

  AugmentOptions options_;
  int size_;                         // output height and width
  int resize_to_;                    // validation: the shorter side before the centre crop
  std::unique_ptr<JpegRegionDecoder> jpeg_;  // reused from image to image
  std::vector<std::uint8_t> region_;         // the decoded crop box, reused between samples
  RgbxResizer resizer_;                      // the box to the batch: resized, mirrored, RGB
  std::vector<std::byte> slice_;             // the rows of a JPEG with restart markers that the box needs
  JpegCounts jpeg_counts_;
};

// Sets OpenCV's process-wide state for augmentation workers: no thread pool
// of its own (one image per worker is the parallelism) and no log lines of
// its own (bad images are counted and reported by the server). Call once,
// before starting the workers.
void configure_opencv_for_workers();

// Whether bytes look like a JPEG (SOI marker), whatever the extension says.
[[nodiscard]] bool looks_like_jpeg(std::span<const std::byte> bytes) noexcept;

}  // namespace tensorcom::pipeline
