// Internal: resampling that gives the pixels Pillow's Image.resize gives
// (and so torchvision's transforms on PIL images): a separable filter whose
// support widens with the downscale factor (antialiasing), coefficients in
// fixed point with 22 fraction bits, a horizontal pass into 8-bit pixels,
// then a vertical pass, each rounded as Pillow rounds. Bilinear (triangle)
// and bicubic (a = -0.5) filters.
//
// An axis plan maps `in_size` source pixels to `out_size` output pixels, of
// which only `out_count` starting at `out_first` are computed: so "resize
// the whole image, then crop" (torchvision's Resize + CenterCrop) costs only
// the crop's pixels, and needs only the source pixels the crop's taps read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tensorcom::pipeline {

enum class ResampleFilter {
  kBilinear,  // PIL.Image.BILINEAR, torchvision's default
  kBicubic,   // PIL.Image.BICUBIC
};

// Where each computed output pixel of one axis reads, and with what weights.
class ResampleAxis {
 public:
  // REQUIRES: in_size, out_size > 0; 0 <= out_first, out_count > 0,
  // out_first + out_count <= out_size.
  ResampleAxis(ResampleFilter filter, int in_size, int out_size, int out_first, int out_count);

  // The source pixels the computed outputs read: [source_first, source_end).
  [[nodiscard]] int source_first() const noexcept { return source_first_; }
  [[nodiscard]] int source_end() const noexcept { return source_end_; }
  [[nodiscard]] int out_count() const noexcept { return static_cast<int>(first_.size()); }
  // Output i (0-based among the computed ones) reads taps(i) source pixels
  // from first(i), with weights weights(i)[0..taps(i)).
  [[nodiscard]] int first(int i) const noexcept { return first_[static_cast<std::size_t>(i)]; }
  [[nodiscard]] int taps(int i) const noexcept { return taps_[static_cast<std::size_t>(i)]; }
  [[nodiscard]] const std::int32_t* weights(int i) const noexcept {
    return weights_.data() + static_cast<std::size_t>(i) * stride_;
  }

 private:
  std::vector<int> first_;
  std::vector<int> taps_;
  std::vector<std::int32_t> weights_;  // stride_ a row
  std::size_t stride_ = 0;
  int source_first_ = 0;
  int source_end_ = 0;
};

// Runs the two passes. One per worker thread: it keeps its row memory.
class PillowResampler {
 public:
  // Reads the source box [x.source_first, x.source_end) x [y.source_first,
  // y.source_end) of an RGBX image whose pixel (origin_x, origin_y) is at
  // `rgbx` (rows `stride` bytes apart), and writes x.out_count() x
  // y.out_count() RGB pixels to out, rows mirrored if flip (after
  // resampling, as RandomHorizontalFlip after RandomResizedCrop).
  // Uses SSE4.1 where the CPU has it; the results are the same to the bit.
  void resize_to_rgb(const std::uint8_t* rgbx, std::size_t stride, int origin_x, int origin_y, const ResampleAxis& x,
                     const ResampleAxis& y, bool flip, std::uint8_t* out);
  // The same with the portable loops only, for tests and other CPUs.
  void resize_to_rgb_portable(const std::uint8_t* rgbx, std::size_t stride, int origin_x, int origin_y,
                              const ResampleAxis& x, const ResampleAxis& y, bool flip, std::uint8_t* out);

 private:
  void run(const std::uint8_t* rgbx, std::size_t stride, int origin_x, int origin_y, const ResampleAxis& x,
           const ResampleAxis& y, bool flip, std::uint8_t* out, bool vector);

  std::vector<std::uint8_t> horizontal_;  // the horizontal pass: RGBX, x.out_count() wide
  std::vector<std::uint8_t> line_;        // one output row, RGBX, before the padding goes
};

}  // namespace tensorcom::pipeline
