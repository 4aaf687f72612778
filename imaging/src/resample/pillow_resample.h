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
// docs/jpeg.md, "Pillow-exact resampling", has the design.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tensorcom::imaging {

enum class ResampleFilter {
  kBilinear,  // PIL.Image.BILINEAR, torchvision's default
  kBicubic,   // PIL.Image.BICUBIC
};

// The stretch of source pixels an axis resizes, as Pillow's `box`: from
// `first` to `end` in pixel edges (fractions allowed), with taps kept to
// [clamp_first, clamp_end), the pixels that exist.
struct SourceSpan {
  double first = 0;
  double end = 0;
  int clamp_first = 0;
  int clamp_end = 0;
};

// Which pass an axis serves: its weights are packed for that pass' vector
// loops (a horizontal pass reads windows, a vertical one tap pairs).
enum class AxisPass { kHorizontal, kVertical, kBoth };

// Where each computed output pixel of one axis reads, and with what weights.
class ResampleAxis {
 public:
  // The whole of in_size pixels, as Image.resize without a box.
  // REQUIRES: in_size, out_size > 0; 0 <= out_first, out_count > 0,
  // out_first + out_count <= out_size.
  ResampleAxis(ResampleFilter filter, int in_size, int out_size, int out_first, int out_count);
  // A span of the source, as Image.resize(box=...): used where the source
  // was decoded at a reduced DCT scale, so the box falls between pixels.
  // REQUIRES: as above, and first < end, clamp_first < clamp_end; the axis
  // serves only `pass` (PillowResampler takes x for the horizontal pass, y
  // for the vertical).
  ResampleAxis(ResampleFilter filter, const SourceSpan& span, int out_size, int out_first, int out_count,
               AxisPass pass = AxisPass::kBoth);
  // An axis with no outputs, to plan() later.
  ResampleAxis() = default;
  // Makes this the axis the constructor above makes, reusing this one's
  // memory (a worker plans two axes an image).
  void plan(ResampleFilter filter, const SourceSpan& span, int out_size, int out_first, int out_count,
            AxisPass pass = AxisPass::kBoth);

  // The source pixels the computed outputs read: [source_first, source_end).
  [[nodiscard]] bool serves(AxisPass pass) const noexcept { return pass_ == AxisPass::kBoth || pass_ == pass; }
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
  // The same weights for 16-bit multiply-adds: each weight w split as
  // hi * 2^11 + lo (0 <= lo < 2^11), both 16-bit, so that
  // sum(p * hi) * 2^11 + sum(p * lo) is sum(p * w) exactly.
  //
  // By window, for a horizontal pass: every output reads the same number of
  // pixels, window() from window_first(i), all inside [source_first,
  // source_end), in groups of four: 4 int32s a group, the 16-bit pairs
  // (hi[p], hi[p+1]), (hi[p+2], hi[p+3]), (lo[p], lo[p+1]), (lo[p+2],
  // lo[p+3]), which the loops broadcast; pixels outside the output's taps
  // weigh 0. A loop over them neither branches on the tap count nor reads
  // outside the source. Compact, because a pass reads every output's
  // weights again for each pair of rows: stored four times over, as whole
  // vectors, they took 20 KB of the L1 cache at 160 outputs.
  // Empty (has_windows() false) when the source is narrower than a window.
  static constexpr int kGroupPixels = 4;
  static constexpr int kGroupInts = 4;
  [[nodiscard]] bool has_windows() const noexcept { return !window_weights_.empty(); }
  [[nodiscard]] int window() const noexcept { return window_; }
  [[nodiscard]] int window_first(int i) const noexcept { return window_first_[static_cast<std::size_t>(i)]; }
  [[nodiscard]] const std::int32_t* window_weights(int i) const noexcept {
    return window_weights_.data() + static_cast<std::size_t>(i) * window_ * kGroupInts / kGroupPixels;
  }
  // By tap pair, for a vertical pass: (hi[t], hi[t+1]) then (lo[t],
  // lo[t+1]) as 16-bit pairs in an int32 each, for t = 0, 2, ...; a
  // missing last tap weighs 0.
  [[nodiscard]] const std::int32_t* tap_pairs(int i) const noexcept {
    return tap_pairs_.data() + static_cast<std::size_t>(i) * pair_stride_;
  }

 private:
  void pack_windows();
  void pack_tap_pairs();

  std::vector<int> first_;
  std::vector<int> taps_;
  std::vector<std::int32_t> weights_;  // stride_ a row
  std::size_t stride_ = 0;
  int window_ = 0;
  std::vector<int> window_first_;
  std::vector<std::int32_t> window_weights_;
  std::vector<std::int32_t> tap_pairs_;  // pair_stride_ a row
  std::size_t pair_stride_ = 0;
  std::vector<double> filter_values_;        // one output's, while planning
  std::vector<std::int32_t> pixel_weights_;  // one output's by window pixel, while packing
  int source_first_ = 0;
  int source_end_ = 0;
  AxisPass pass_ = AxisPass::kBoth;
};

// Which loops run the passes; all give the same bits.
enum class ResampleKernels {
  kPortable,
  kSse41,  // 32-bit multiplies, four channels at a time
  kAvx2,   // 16-bit multiply-adds on split weights, eight or sixteen lanes
};

// Runs the two passes. One per worker thread: it keeps its row memory.
class PillowResampler {
 public:
  // Whether this build and CPU can run those loops.
  [[nodiscard]] static bool available(ResampleKernels kernels) noexcept;
  // The fastest available.
  [[nodiscard]] static ResampleKernels fastest() noexcept;

  // Reads the source box [x.source_first, x.source_end) x [y.source_first,
  // y.source_end) of an RGBX image whose pixel (origin_x, origin_y) is at
  // `rgbx` (rows `stride` bytes apart), and writes x.out_count() x
  // y.out_count() RGB pixels to out, rows mirrored if flip (after
  // resampling, as RandomHorizontalFlip after RandomResizedCrop).
  // Uses the fastest loops the CPU has; the results are the same to the bit.
  void resize_to_rgb(const std::uint8_t* rgbx, std::size_t stride, int origin_x, int origin_y, const ResampleAxis& x,
                     const ResampleAxis& y, bool flip, std::uint8_t* out) {
    resize_to_rgb(rgbx, stride, origin_x, origin_y, x, y, flip, out, fastest());
  }
  // The same with the loops given, for tests and benchmarks.
  // REQUIRES: available(kernels).
  void resize_to_rgb(const std::uint8_t* rgbx, std::size_t stride, int origin_x, int origin_y, const ResampleAxis& x,
                     const ResampleAxis& y, bool flip, std::uint8_t* out, ResampleKernels kernels);

  // The same in steps, for a source that arrives a few rows at a time (a
  // decoder's): begin(), then take_rows() with the rows in order (rows the
  // vertical taps do not read are passed over), then finish(). The axes
  // must outlive the steps. The horizontal pass runs on each row as it
  // comes, while it is in cache.
  // The output's rows are mirrored if flip.
  // Throws ArgumentError unless x serves a horizontal pass and y a vertical one.
  void begin(const ResampleAxis& x, const ResampleAxis& y, int origin_x, bool flip, ResampleKernels kernels);
  // `count` rows from axis row `first_row`, each with axis column origin_x
  // at its start, rows `stride` bytes apart.
  void take_rows(const std::uint8_t* rgbx, std::size_t stride, int first_row, int count) noexcept;
  // REQUIRES: every row in [y.source_first, y.source_end) was taken.
  void finish(std::uint8_t* out);

 private:
  void horizontal(const std::uint8_t* row_a, const std::uint8_t* row_b, std::uint8_t* dst_a, std::uint8_t* dst_b);
  [[nodiscard]] std::uint8_t* pass_row(int r) noexcept {
    return horizontal_.data() + static_cast<std::size_t>(r) * row_bytes_;
  }

  const ResampleAxis* x_ = nullptr;
  const ResampleAxis* y_ = nullptr;
  int origin_x_ = 0;
  ResampleKernels kernels_ = ResampleKernels::kPortable;
  bool flip_ = false;
  // With AVX2, the horizontal pass drops the padding and mirrors: the
  // vertical pass then has a quarter less to do and writes the output's RGB
  // rows itself. Otherwise both passes work on RGBX, and a last step makes
  // each output row.
  bool rgb_rows_ = false;
  std::size_t row_bytes_ = 0;             // of a horizontal-pass row
  std::vector<std::uint8_t> horizontal_;  // the horizontal pass: x.out_count() wide
  std::vector<std::uint8_t> line_;        // one output row, RGBX, before the padding goes; a scratch row for RGB
};

}  // namespace tensorcom::imaging
