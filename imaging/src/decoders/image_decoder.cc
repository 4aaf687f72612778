#include "decoders/image_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tensorcom/imaging/problem.h"

namespace tensorcom::imaging {

namespace {

// One axis of Pillow's resize of the source pixels [first, first + length)
// of a line `whole` pixels long, decoded at scale num/8: the span falls
// between pixels unless num is 8. Coordinates are made relative to the
// span's first whole pixel (*origin), so that at full scale the axis is the
// one Pillow computes for the cropped image, to the bit.
void plan_scaled_axis(ResampleAxis& axis, ResampleFilter filter, int first, int length, int whole, int num,
                      int out_size, int out_first, int out_count, AxisPass pass, int* origin) {
  const double begin = first * num / 8.0, end = (first + length) * num / 8.0;
  *origin = static_cast<int>(std::floor(begin));
  const int scaled_whole = (whole * num + 7) / 8;  // libjpeg's scaled size, rounded up
  const int clamp_end = std::min(static_cast<int>(std::ceil(end)), scaled_whole) - *origin;
  axis.plan(filter, SourceSpan{begin - *origin, end - *origin, 0, clamp_end}, out_size, out_first, out_count, pass);
}

}  // namespace

void DecodeContext::check_pixels(std::uint64_t width, std::uint64_t height) const {
  if (width == 0 || height == 0) throw ImageError(Problem::kUndecodable, "image of zero size");
  // Divided, not multiplied: a header can declare sizes whose product
  // overflows 64 bits.
  if (width > options.max_pixels / height) {
    throw ImageError(Problem::kTooManyPixels, std::to_string(width) + "x" + std::to_string(height) + " exceeds " +
                                                  std::to_string(options.max_pixels) + " pixels");
  }
}

void PillowAxes::plan(ResampleFilter filter, Size image, const Transform& t, int num) {
  plan_scaled_axis(x, filter, t.crop.x, t.crop.width, image.width, num, t.resized.width, t.window.x, t.window.width,
                   AxisPass::kHorizontal, &origin_x);
  plan_scaled_axis(y, filter, t.crop.y, t.crop.height, image.height, num, t.resized.height, t.window.y, t.window.height,
                   AxisPass::kVertical, &origin_y);
}

}  // namespace tensorcom::imaging
