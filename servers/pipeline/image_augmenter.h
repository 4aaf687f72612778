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

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crop.h"
#include "jpeg_restart_slice.h"
#include "pillow_resample.h"
#include "rgbx_resize.h"
#include "tensorcom/error.h"
#include "tensorcom/metadata.h"

namespace tensorcom::pipeline {

// How the crop becomes size x size pixels.
enum class Resample {
  kFast,      // decode at the smallest DCT scale that keeps >= size pixels, 2-tap bilinear (OpenCV's INTER_LINEAR)
  kBilinear,  // full-scale decode, Pillow's antialiased BILINEAR: torchvision's pixels
  kBicubic,   // full-scale decode, Pillow's BICUBIC
};

// "bilinear", "bicubic" or "fast"; nothing for any other name.
[[nodiscard]] std::optional<Resample> parse_resample(std::string_view name) noexcept;

struct AugmentOptions {
  bool validation = false;           // resize the shorter side to size*256/224, centre crop
  Resample resample = Resample::kBilinear;
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
struct JpegRegion;

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

  // How the last sample augment() made was cut: its crop box in source
  // pixels (for --val, the source pixels its centre crop covers), flip and
  // source size. Valid after augment() returned.
  [[nodiscard]] const SampleGeometry& last_geometry() const noexcept { return geometry_; }

  [[nodiscard]] const AugmentOptions& options() const noexcept { return options_; }
  [[nodiscard]] int size() const noexcept { return size_; }

  // JPEGs decoded so far: how many were cut to their crop's restart
  // intervals, out of all of them (the rest were entropy-decoded from the top).
  struct JpegCounts {
    std::uint64_t sliced = 0;
    std::uint64_t total = 0;
  };
  [[nodiscard]] JpegCounts jpeg_counts() const noexcept { return jpeg_counts_; }
  // Time spent decoding so far (entropy decoding and IDCT of JPEGs, OpenCV's
  // decoding of other formats): what augment() took beyond it went to
  // cropping, resizing and flipping. For the servers' per-stage metrics.
  [[nodiscard]] std::chrono::steady_clock::duration decode_time() const noexcept { return decode_time_; }

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
  void augment_jpeg_as_pillow(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out);
  // The two axes that take a width x height source to the output as
  // torchvision does: the crop box resized (training), or the whole image
  // resized to resize_to on its shorter side, then centre-cropped.
  // Decoded at scale num/8.
  struct Axes;
  const Axes& pillow_axes(int width, int height, const CropBox& box, int num);
  // What Resize(resize_to) makes of a width x height image, and where
  // CenterCrop(size) starts in it.
  struct ResizedImage {
    int width, height, left, top;
  };
  [[nodiscard]] ResizedImage resized_for_validation(int width, int height) const;
  // The DCT scale num/8 to decode at before resizing span_w x span_h source
  // pixels to out_w x out_h: the smallest that leaves at least
  // kDctShrinkLeft of the shrinking to Pillow's filter; 8 (full scale)
  // where the shrink is smaller.
  [[nodiscard]] int choose_pillow_scale(int span_w, int span_h, int out_w, int out_h) const;
  static constexpr int kDctShrinkLeft = 2;
  // Decodes `box` of the JPEG whose header was just read, at scale num/8,
  // through its restart intervals when it has them. With `rows`, hands the
  // rows to it as they are decoded instead of keeping them (the region
  // returned has no pixels).
  class ResamplerRows;
  JpegRegion decode_jpeg_box(std::span<const std::byte> encoded, const CropBox& box, int num,
                             ResamplerRows* rows = nullptr);
  void augment_other(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out);
  [[nodiscard]] CropBox choose_crop(int width, int height, std::mt19937_64& rng) const;
  [[nodiscard]] bool draw_flip(std::mt19937_64& rng) const;
  void record(int width, int height, const CropBox& box, bool flip);
  void check_pixels(std::uint64_t width, std::uint64_t height) const;

  AugmentOptions options_;
  int size_;                         // output height and width
  int resize_to_;                    // validation: the shorter side before the centre crop
  std::unique_ptr<JpegRegionDecoder> jpeg_;  // reused from image to image
  std::vector<std::uint8_t> region_;         // the decoded crop box, reused between samples
  RgbxResizer resizer_;                      // the box to the batch: resized, mirrored, RGB
  PillowResampler pillow_;                   // the same as torchvision on PIL
  std::unique_ptr<Axes> axes_;               // its plan for the current image, memory reused
  std::vector<std::byte> slice_;             // the headers of a JPEG with restart markers cut to the box's rows
  std::vector<ByteRange> slice_intervals_;   // where the slice's restart intervals lie in slice_unstuffed_
  std::vector<std::byte> slice_unstuffed_;   // their bytes, unstuffed (the slice holds its headers only)
  JpegCounts jpeg_counts_;
  std::chrono::steady_clock::duration decode_time_{};
  SampleGeometry geometry_;
};

// Sets OpenCV's process-wide state for augmentation workers: no thread pool
// of its own (one image per worker is the parallelism) and no log lines of
// its own (bad images are counted and reported by the server). Call once,
// before starting the workers.
void configure_opencv_for_workers();

// Whether bytes look like a JPEG (SOI marker), whatever the extension says.
[[nodiscard]] bool looks_like_jpeg(std::span<const std::byte> bytes) noexcept;

}  // namespace tensorcom::pipeline
