#include "decoders/jpeg_decoder.h"

#include <algorithm>

#include "resample/rgbx_to_rgb.h"
#include "tensorcom/imaging/problem.h"

namespace tensorcom::imaging {

namespace {

using Clock = std::chrono::steady_clock;

// The DCT scale (num/8) with the fewest pixels that still leaves the box at
// least the output's pixels across both ways, so the resize only ever shrinks.
int choose_scale_num(const PixelBox& box, Size output) {
  for (int num : {1, 2, 4}) {
    if (box.width * num / 8 >= output.width && box.height * num / 8 >= output.height) return num;
  }
  return 8;
}

// Pillow's antialiasing filter spans the shrink factor; a DCT-scaled decode
// first shrinks by num/8 with a different (sharper) lowpass. Where at least
// this much shrinking is left for Pillow's filter, the two agree closely
// (tests/bench/fidelity_photos.py measures how closely).
constexpr int kDctShrinkLeft = 2;

// The DCT scale num/8 to decode at before resizing span_w x span_h source
// pixels to out_w x out_h: the smallest that leaves kDctShrinkLeft of the
// shrinking to Pillow's filter; 8 (full scale) where the shrink is smaller.
int choose_pillow_scale(int span_w, int span_h, Size resized) {
  for (int num = 1; num < 8; ++num) {
    if (span_w * num >= kDctShrinkLeft * 8 * resized.width && span_h * num >= kDctShrinkLeft * 8 * resized.height) {
      return num;
    }
  }
  return 8;
}

// No JPEG holds more than about 512 pixels a byte (a flat greyscale
// progressive image spends at least a bit on each 8x8 block); one that
// claims far more is cut short or forged, and libjpeg would invent the rest
// (a 1.5 KB file claiming 16000x16000 decoded 768 MB of grey). Small
// claims are let through: they cost little whatever their bytes.
constexpr std::uint64_t kMostPixelsPerByte = 1024;
constexpr std::uint64_t kPixelsAlwaysDecoded = std::uint64_t{1} << 22;

void check_density(const JpegInfo& info, std::size_t bytes) {
  const std::uint64_t pixels = static_cast<std::uint64_t>(info.width) * static_cast<std::uint64_t>(info.height);
  if (pixels <= kPixelsAlwaysDecoded || pixels / kMostPixelsPerByte <= bytes) return;
  throw ImageError(Problem::kTooManyPixels, std::to_string(info.width) + "x" + std::to_string(info.height) +
                                                " claimed by " + std::to_string(bytes) +
                                                " bytes: more than a JPEG can hold (cut short or forged)");
}

}  // namespace

// Hands a decoder's rows on to the resampler, shifted from the rows of the
// JPEG decoded (a slice's, when one was cut) to the resampler's, and timed:
// the decoding time reported leaves resampling out.
class JpegDecoder::ResamplerRows final : public RowSink {
 public:
  ResamplerRows(PillowResampler& to, int shift) : to_(to), shift_(shift) {}
  void shift_by(int rows) { shift_ += rows; }
  [[nodiscard]] Clock::duration spent() const { return spent_; }

  void take_rows(const std::uint8_t* pixels, std::size_t stride, int first_row, int count) noexcept override {
    const auto start = Clock::now();
    to_.take_rows(pixels, stride, first_row + shift_, count);
    spent_ += Clock::now() - start;
  }

 private:
  PillowResampler& to_;
  int shift_;
  Clock::duration spent_{};
};

Size JpegDecoder::open(std::span<const std::byte> encoded) {
  const JpegInfo info = jpeg_.read_header(encoded);
  context_.check_pixels(static_cast<std::uint64_t>(info.width), static_cast<std::uint64_t>(info.height));
  check_density(info, encoded.size());
  image_ = {info.width, info.height};
  return image_;
}

void JpegDecoder::render(std::span<const std::byte> encoded, const Transform& t, std::uint8_t* out) {
  if (context_.options.resample == Resample::kFast) {
    const JpegRegion region = decode_crop(encoded, t);
    resizer_.resize_to_rgb(region.pixels, region.width, region.height, region.stride, t.window.width, t.window.height,
                           t.flip, out);
    return;
  }
  const int num = choose_pillow_scale(t.crop.width, t.crop.height, t.resized);
  axes_.plan(context_.filter(), image_, t, num);
  const PillowAxes& a = axes_;
  // Only the pixels the taps read are decoded: the box of source pixels
  // whose num/8 scaling covers them.
  const int sx0 = a.origin_x + a.x.source_first(), sx1 = a.origin_x + a.x.source_end();
  const int sy0 = a.origin_y + a.y.source_first(), sy1 = a.origin_y + a.y.source_end();
  const int x0 = sx0 * 8 / num, y0 = sy0 * 8 / num;
  const int x1 = std::min((sx1 * 8 + num - 1) / num, image_.width);
  const int y1 = std::min((sy1 * 8 + num - 1) / num, image_.height);
  // Decoded rows go through the horizontal pass as they come. The decoder
  // starts its box at scaled column x0 * num / 8 (the slice's origin, a
  // multiple of 8, divides out whole).
  context_.pillow.begin(a.x, a.y, x0 * num / 8 - a.origin_x, t.flip, PillowResampler::fastest());
  ResamplerRows rows(context_.pillow, -a.origin_y);
  (void)decode_box(encoded, PixelBox{x0, y0, x1 - x0, y1 - y0}, num, &rows);
  context_.pillow.finish(out);
}

void JpegDecoder::decode_whole(std::span<const std::byte> encoded, std::uint8_t* out) {
  const JpegRegion region = decode_box(encoded, {0, 0, image_.width, image_.height}, 8);
  const std::size_t row_bytes = static_cast<std::size_t>(image_.width) * 3;
  for (int y = 0; y < image_.height; ++y) {
    rgbx_to_rgb(region.pixels + static_cast<std::size_t>(y) * region.stride, image_.width, 1, false,
                out + static_cast<std::size_t>(y) * row_bytes);
  }
}

JpegRegion JpegDecoder::decode_crop(std::span<const std::byte> encoded, const Transform& t) {
  const PixelBox box = t.source_box();
  return decode_box(encoded, box, choose_scale_num(box, t.output()));
}

// Decodes `box` of the JPEG whose header was just read, at scale num/8,
// through its restart intervals when it has them. With `rows`, hands the
// rows to it as they are decoded instead of keeping them (the region
// returned has no pixels).
JpegRegion JpegDecoder::decode_box(std::span<const std::byte> encoded, const PixelBox& box, int num,
                                   ResamplerRows* rows) {
  const auto start = Clock::now();
  PixelBox origin;  // of the decoded JPEG in the source: a slice of it, when it has restart markers to cut at
  const auto slice =
      slice_restart_intervals(encoded, box, decoder_context(num), slice_, &slice_intervals_, &slice_unstuffed_);
  if (slice) {
    (void)jpeg_.read_header(slice_);
    origin = *slice;
  }
  // The slice starts on an MCU boundary, a multiple of 8 pixels: num/8 of it is whole.
  const int shift_x = origin.x * num / 8, shift_y = origin.y * num / 8;
  const int x = box.x - origin.x, y = box.y - origin.y;
  const auto intervals = slice ? std::span<const ByteRange>(slice_intervals_) : std::span<const ByteRange>();
  const auto unstuffed = slice ? std::span<const std::byte>(slice_unstuffed_) : std::span<const std::byte>();
  JpegRegion region;
  if (rows) {
    rows->shift_by(shift_y);
    region = jpeg_.decode_rows(x, y, box.width, box.height, num, region_, *rows, intervals, unstuffed);
  } else {
    region = jpeg_.decode(x, y, box.width, box.height, num, region_, intervals, unstuffed);
  }
  ++counts_.total;
  if (slice) ++counts_.sliced;
  region.x += shift_x;
  region.y += shift_y;
  context_.decode_time += Clock::now() - start - (rows ? rows->spent() : Clock::duration{});
  return region;
}

}  // namespace tensorcom::imaging
