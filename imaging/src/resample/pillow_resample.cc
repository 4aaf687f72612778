#include "resample/pillow_resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "resample/cpu_features.h"
#include "resample/pillow_resample_kernels.h"
#include "resample/rgbx_to_rgb.h"
#include "tensorcom/codec/error.h"

namespace tensorcom::imaging {
namespace {

using kernels::kPrecisionBits;
constexpr std::int32_t kHalf = std::int32_t{1} << (kPrecisionBits - 1);

double bilinear(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double support_of(ResampleFilter filter) { return filter == ResampleFilter::kBilinear ? 1.0 : 2.0; }

double weigh(ResampleFilter filter, double x) { return filter == ResampleFilter::kBilinear ? bilinear(x) : bicubic(x); }

// Pillow's rounding of a normalised weight to fixed point: half away from zero.
std::int32_t to_fixed(double k) {
  const double scaled = k * (1 << kPrecisionBits);
  return static_cast<std::int32_t>(k < 0 ? scaled - 0.5 : scaled + 0.5);
}

std::uint8_t clip8(std::int32_t sum) {
  const std::int32_t v = sum >> kPrecisionBits;  // arithmetic: negative sums clip to 0
  return static_cast<std::uint8_t>(std::clamp(v, 0, 255));
}

}  // namespace

ResampleAxis::ResampleAxis(ResampleFilter filter, int in_size, int out_size, int out_first, int out_count)
    : ResampleAxis(filter, SourceSpan{0, static_cast<double>(in_size), 0, in_size}, out_size, out_first, out_count) {}

ResampleAxis::ResampleAxis(ResampleFilter filter, const SourceSpan& span, int out_size, int out_first, int out_count,
                           AxisPass pass) {
  plan(filter, span, out_size, out_first, out_count, pass);
}

void ResampleAxis::plan(ResampleFilter filter, const SourceSpan& span, int out_size, int out_first, int out_count,
                        AxisPass pass) {
  // As Pillow's precompute_coeffs: the filter is stretched by the downscale
  // factor; taps start where centre - support rounds to.
  const double scale = (span.end - span.first) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = support_of(filter) * filter_scale;
  stride_ = static_cast<std::size_t>(std::ceil(support)) * 2 + 1;
  first_.resize(static_cast<std::size_t>(out_count));
  taps_.resize(static_cast<std::size_t>(out_count));
  weights_.assign(static_cast<std::size_t>(out_count) * stride_, 0);
  filter_values_.resize(stride_);
  double* k = filter_values_.data();
  source_first_ = span.clamp_end;
  source_end_ = span.clamp_first;
  for (int i = 0; i < out_count; ++i) {
    const double center = span.first + (out_first + i + 0.5) * scale;
    // Truncation as Pillow's (int) cast, then clamped to the image.
    const int xmin = std::max(static_cast<int>(center - support + 0.5), span.clamp_first);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), span.clamp_end) - xmin;
    double total = 0;
    const double ss = 1.0 / filter_scale;  // multiplied, not divided: Pillow's bits
    for (int t = 0; t < xmax; ++t) {
      k[t] = weigh(filter, (t + xmin - center + 0.5) * ss);
      total += k[t];
    }
    std::int32_t* w = weights_.data() + static_cast<std::size_t>(i) * stride_;
    for (int t = 0; t < xmax; ++t) w[t] = to_fixed(total != 0.0 ? k[t] / total : k[t]);
    first_[static_cast<std::size_t>(i)] = xmin;
    taps_[static_cast<std::size_t>(i)] = xmax;
    source_first_ = std::min(source_first_, xmin);
    source_end_ = std::max(source_end_, xmin + xmax);
  }
  pass_ = pass;
  window_ = 0;
  window_first_.clear();
  window_weights_.clear();
  tap_pairs_.clear();
  if (pass != AxisPass::kVertical) pack_windows();
  if (pass != AxisPass::kHorizontal) pack_tap_pairs();
}

namespace {

// A weight as the 16-bit halves of the split hi * 2^11 + lo, the arithmetic
// shift keeping the sign in hi, and two such halves packed in one int32 (the
// first in the low bits, as vpmaddwd pairs them).
std::int16_t high_part(std::int32_t w) { return static_cast<std::int16_t>(w >> kernels::kLowBits); }
std::int16_t low_part(std::int32_t w) { return static_cast<std::int16_t>(w & kernels::kLowMask); }
std::int32_t pair16(std::int16_t a, std::int16_t b) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint16_t>(a)) |
                                   static_cast<std::uint32_t>(static_cast<std::uint16_t>(b)) << 16);
}

}  // namespace

void ResampleAxis::pack_windows() {
  // Pillow's tap arrays are ceil(support) * 2 + 1 long, but an output has at
  // most about 2 * support taps: the window is the longest rounded up.
  const int longest = first_.empty() ? 0 : *std::max_element(taps_.begin(), taps_.end());
  window_ = (longest + kGroupPixels - 1) / kGroupPixels * kGroupPixels;
  if (source_end_ - source_first_ < window_) return;  // the vector loops take taps one by one
  const std::size_t outputs = first_.size();
  window_first_.resize(outputs);
  window_weights_.assign(outputs * static_cast<std::size_t>(window_) * kGroupInts / kGroupPixels, 0);
  pixel_weights_.resize(static_cast<std::size_t>(window_));
  for (std::size_t i = 0; i < outputs; ++i) {
    // Shifted left where the window would run past the source's end.
    const int start = std::max(std::min(first_[i], source_end_ - window_), source_first_);
    window_first_[i] = start;
    std::fill(pixel_weights_.begin(), pixel_weights_.end(), 0);
    std::copy_n(weights(static_cast<int>(i)), taps_[i], pixel_weights_.begin() + (first_[i] - start));
    std::int32_t* out = window_weights_.data() + i * static_cast<std::size_t>(window_) * kGroupInts / kGroupPixels;
    for (int p = 0; p < window_; p += kGroupPixels, out += kGroupInts) {
      const std::int32_t* w = pixel_weights_.data() + p;
      out[0] = pair16(high_part(w[0]), high_part(w[1]));
      out[1] = pair16(high_part(w[2]), high_part(w[3]));
      out[2] = pair16(low_part(w[0]), low_part(w[1]));
      out[3] = pair16(low_part(w[2]), low_part(w[3]));
    }
  }
}

void ResampleAxis::pack_tap_pairs() {
  const std::size_t pairs = (stride_ + 1) / 2;
  pair_stride_ = 2 * pairs;
  tap_pairs_.assign(first_.size() * pair_stride_, 0);
  for (std::size_t i = 0; i < first_.size(); ++i) {
    const std::int32_t* w = weights(static_cast<int>(i));
    auto weight = [&](int t) { return t < taps_[i] ? w[t] : 0; };
    std::int32_t* out = tap_pairs_.data() + i * pair_stride_;
    for (int t = 0; t < taps_[i]; t += 2, out += 2) {
      out[0] = pair16(high_part(weight(t)), high_part(weight(t + 1)));
      out[1] = pair16(low_part(weight(t)), low_part(weight(t + 1)));
    }
  }
}

namespace {

// One pass over `count` outputs, each a weighted sum of pixels `step` bytes
// apart starting at pixel_of(i): RGBX in, RGBX (X undefined) out, 4 bytes
// an output. The portable form of the vector loops (pillow_resample_x86.cc).
template <class Axis, class PixelOf>
void pass_portable(const Axis& axis, int count, std::size_t step, PixelOf pixel_of, std::uint8_t* dst) {
  for (int i = 0; i < count; ++i) {
    const std::int32_t* w = axis.weights(i);
    const std::uint8_t* px = pixel_of(i);
    std::int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
    for (int t = 0; t < axis.taps(i); ++t, px += step) {
      s0 += px[0] * w[t];
      s1 += px[1] * w[t];
      s2 += px[2] * w[t];
    }
    dst[4 * i] = clip8(s0);
    dst[4 * i + 1] = clip8(s1);
    dst[4 * i + 2] = clip8(s2);
  }
}

}  // namespace

bool PillowResampler::available(ResampleKernels kernels) noexcept {
  switch (kernels) {
    case ResampleKernels::kPortable: return true;
    case ResampleKernels::kSse41: return cpu_has_sse41();
    case ResampleKernels::kAvx2: return cpu_has_avx2();
  }
  return false;
}

ResampleKernels PillowResampler::fastest() noexcept {
  static const ResampleKernels best = available(ResampleKernels::kAvx2)    ? ResampleKernels::kAvx2
                                      : available(ResampleKernels::kSse41) ? ResampleKernels::kSse41
                                                                           : ResampleKernels::kPortable;
  return best;
}

void PillowResampler::resize_to_rgb(const std::uint8_t* rgbx, std::size_t stride, int origin_x, int origin_y,
                                    const ResampleAxis& x, const ResampleAxis& y, bool flip, std::uint8_t* out,
                                    ResampleKernels kernels) {
  begin(x, y, origin_x, flip, kernels);
  const int first = y.source_first();
  take_rows(rgbx + static_cast<std::ptrdiff_t>(first - origin_y) * static_cast<std::ptrdiff_t>(stride), stride, first,
            y.source_end() - first);
  finish(out);
}

void PillowResampler::begin(const ResampleAxis& x, const ResampleAxis& y, int origin_x, bool flip,
                            ResampleKernels kernels) {
  // The vector loops read the packing of their pass: an axis without it
  // would have them read an empty table.
  if (!x.serves(AxisPass::kHorizontal) || !y.serves(AxisPass::kVertical)) {
    throw ArgumentError("resampling axes packed for the other pass");
  }
  x_ = &x;
  y_ = &y;
  origin_x_ = origin_x;
  kernels_ = kernels;
  flip_ = flip;
  // The RGB vertical pass takes 32 bytes a step, the last step overlapping.
  rgb_rows_ = kernels == ResampleKernels::kAvx2 && x.has_windows() && x.out_count() * 3 >= 32;
  // RGB rows have 16 bytes of slack: the horizontal pass' stores run over.
  row_bytes_ = static_cast<std::size_t>(x.out_count()) * (rgb_rows_ ? 3 : 4) + (rgb_rows_ ? 16 : 0);
  // 32 bytes of slack: the vector loops load whole 16- or 32-byte groups.
  horizontal_.resize(row_bytes_ * static_cast<std::size_t>(y.source_end() - y.source_first()) + 32);
  line_.resize(static_cast<std::size_t>(x.out_count()) * 4 + 32);
}

// The horizontal pass of one source row (row_b null) or two, into 8 bits.
void PillowResampler::horizontal(const std::uint8_t* row_a, const std::uint8_t* row_b, std::uint8_t* dst_a,
                                 std::uint8_t* dst_b) {
  const ResampleAxis& x = *x_;
  switch (kernels_) {
#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
    case ResampleKernels::kAvx2:
      if (rgb_rows_) {
        // A lone row goes with itself, its copy into the scratch row.
        kernels::horizontal_avx2_rows_rgb(x, row_a, row_b ? row_b : row_a, origin_x_, flip_, dst_a,
                                          row_b ? dst_b : line_.data());
      } else if (row_b) {
        kernels::horizontal_avx2_rows(x, row_a, row_b, origin_x_, dst_a, dst_b);
      } else {
        kernels::horizontal_avx2(x, row_a, origin_x_, dst_a);
      }
      return;
    case ResampleKernels::kSse41:
      kernels::horizontal_sse41(x, row_a, origin_x_, dst_a);
      if (row_b) kernels::horizontal_sse41(x, row_b, origin_x_, dst_b);
      return;
#endif
    default:
      for (auto [src, dst] : {std::pair{row_a, dst_a}, std::pair{row_b, dst_b}}) {
        if (!src) break;
        auto pixel_of = [&, src = src](int i) { return src + static_cast<std::size_t>(x.first(i) - origin_x_) * 4; };
        pass_portable(x, x.out_count(), 4, pixel_of, dst);
      }
      return;
  }
}

void PillowResampler::take_rows(const std::uint8_t* rgbx, std::size_t stride, int first_row, int count) noexcept {
  // Only the rows the vertical taps read.
  const int begin = std::max(first_row, y_->source_first()), end = std::min(first_row + count, y_->source_end());
  auto source_row = [&](int r) { return rgbx + static_cast<std::size_t>(r - first_row) * stride; };
  const int top = y_->source_first();
  int r = begin;
  for (; r + 1 < end; r += 2) horizontal(source_row(r), source_row(r + 1), pass_row(r - top), pass_row(r + 1 - top));
  if (r < end) horizontal(source_row(r), nullptr, pass_row(r - top), nullptr);
}

void PillowResampler::finish(std::uint8_t* out) {
  const ResampleAxis& y = *y_;
  const int out_w = x_->out_count();
#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
  if (rgb_rows_) {
    const std::size_t out_bytes = static_cast<std::size_t>(out_w) * 3;
    for (int j = 0; j < y.out_count(); ++j) {
      kernels::vertical_avx2_bytes(pass_row(y.first(j) - y.source_first()), row_bytes_, y, j, out_bytes,
                                   out + static_cast<std::size_t>(j) * out_bytes);
    }
    return;
  }
#endif
  // Vertical pass, a row of RGBX at a time, then into the output's RGB row.
  for (int j = 0; j < y.out_count(); ++j) {
    const std::uint8_t* top = pass_row(y.first(j) - y.source_first());
    switch (kernels_) {
#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
      case ResampleKernels::kAvx2: kernels::vertical_avx2(top, row_bytes_, y, j, out_w, line_.data()); break;
      case ResampleKernels::kSse41: kernels::vertical_sse41(top, row_bytes_, y, j, out_w, line_.data()); break;
#endif
      default: {
        // Every output pixel of the row shares the row's weights.
        struct RowAxis {
          int taps_;
          const std::int32_t* w_;
          int taps(int) const { return taps_; }
          const std::int32_t* weights(int) const { return w_; }
        } row{y.taps(j), y.weights(j)};
        auto pixel_of = [&](int i) { return top + 4 * static_cast<std::size_t>(i); };
        pass_portable(row, out_w, row_bytes_, pixel_of, line_.data());
        break;
      }
    }
    std::uint8_t* out_row = out + static_cast<std::size_t>(j) * out_w * 3;
    if (kernels_ == ResampleKernels::kPortable) {
      rgbx_to_rgb_portable(line_.data(), out_w, 1, flip_, out_row);
    } else {
      rgbx_to_rgb(line_.data(), out_w, 1, flip_, out_row);
    }
  }
}

}  // namespace tensorcom::imaging
