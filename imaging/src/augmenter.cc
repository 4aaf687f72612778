#include "tensorcom/imaging/augmenter.h"

#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgproc.hpp>
#if TENSORCOM_OPENCV_CODECS
#include <opencv2/imgcodecs.hpp>
#endif

#include <cmath>
#include <vector>

#include "jpeg/jpeg_region.h"
#include "jpeg/jpeg_restart_slice.h"
#include "resample/pillow_resample.h"
#include "resample/rgbx_resize.h"
#include "resample/rgbx_to_rgb.h"
#include "tensorcom/imaging/format.h"

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

// Any decoded OpenCV image as 8-bit RGB, or RGBX (four bytes a pixel, as
// the JPEG decoder gives them) when padded: one conversion either way.
cv::Mat to_8bit(const cv::Mat& image, bool padded) {
  cv::Mat eight = image;
  if (image.depth() == CV_16U) {
    image.convertTo(eight, CV_8U, 1.0 / 257.0);
  } else if (image.depth() != CV_8U) {
    throw ImageError(Problem::kUndecodable, "unsupported pixel depth " + std::to_string(image.depth()));
  }
  cv::Mat out;
  switch (eight.channels()) {
    case 1: cv::cvtColor(eight, out, padded ? cv::COLOR_GRAY2RGBA : cv::COLOR_GRAY2RGB); break;
    case 3: cv::cvtColor(eight, out, padded ? cv::COLOR_BGR2RGBA : cv::COLOR_BGR2RGB); break;
    case 4: cv::cvtColor(eight, out, padded ? cv::COLOR_BGRA2RGBA : cv::COLOR_BGRA2RGB); break;
    default: throw ImageError(Problem::kUndecodable, std::to_string(eight.channels()) + " channels");
  }
  return out;
}

// Resizes src into the output and flips it if asked.
void resize_into(const cv::Mat& src, Size output, bool flip, std::uint8_t* out) {
  cv::Mat dst(output.height, output.width, CV_8UC3, out);
  cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_LINEAR);
  if (dst.data != out) throw Error("resize reallocated its output");  // cannot happen: same size and type
  if (flip) cv::flip(dst, dst, 1);
}

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

// Refuses a transform that does not fit a width x height image.
void check_fits(const Transform& t, int width, int height) {
  const PixelBox& c = t.crop;
  if (c.width <= 0 || c.height <= 0 || c.x < 0 || c.y < 0 || c.x > width - c.width || c.y > height - c.height) {
    throw ArgumentError("crop box " + std::to_string(c.width) + "x" + std::to_string(c.height) + " at (" +
                        std::to_string(c.x) + ", " + std::to_string(c.y) + ") is not inside the " +
                        std::to_string(width) + "x" + std::to_string(height) + " image");
  }
  if (t.resized.width <= 0 || t.resized.height <= 0 || !t.window_inside()) {
    throw ArgumentError("output window " + std::to_string(t.window.width) + "x" + std::to_string(t.window.height) +
                        " at (" + std::to_string(t.window.x) + ", " + std::to_string(t.window.y) +
                        ") is not inside the resized " + std::to_string(t.resized.width) + "x" +
                        std::to_string(t.resized.height) + " image");
  }
}

}  // namespace

std::optional<Resample> parse_resample(std::string_view name) noexcept {
  if (name == "bilinear") return Resample::kBilinear;
  if (name == "bicubic") return Resample::kBicubic;
  if (name == "fast") return Resample::kFast;
  return std::nullopt;
}

void configure_opencv_for_workers() {
  // Parallelism is ours: one image per worker thread. OpenCV's own pool would
  // split each small resize across threads that compete with the workers,
  // and wake them (futex calls) for every image.
  cv::setNumThreads(0);
  // Bad images are counted and reported by the caller, rate-limited; OpenCV
  // would print a line of its own for each.
  cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
}

class ImageAugmenter::Engine {
 public:
  Engine(AugmentOptions options, Size output) : options_(options), output_(output) {
    if (output.width <= 0 || output.height <= 0) throw ArgumentError("image size must be positive");
    if (options_.resize.shorter <= 0 && (options_.resize.width <= 0 || options_.resize.height <= 0)) {
      options_.resize.shorter = static_cast<int>(std::lround(std::min(output.width, output.height) * 256.0 / 224.0));
    }
  }

  void augment(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out);
  void render(std::span<const std::byte> encoded, const Transform& t, std::uint8_t* out);
  [[nodiscard]] Transform draw_transform(int width, int height, std::mt19937_64& rng) const;
  Size decode(std::span<const std::byte> encoded, const std::function<std::uint8_t*(Size)>& output);
  [[nodiscard]] Size read_size(std::span<const std::byte> encoded) const;
  DecodedCrop decode_jpeg_crop(std::span<const std::byte> encoded, std::mt19937_64& rng, bool* flip);

  AugmentOptions options_;
  Size output_;
  JpegCounts jpeg_counts_;
  Clock::duration decode_time_{};
  SampleGeometry geometry_;

 private:
  // The two axes that take the transform's crop to its window as Pillow
  // does, the source decoded at scale num/8.
  struct Axes {
    ResampleAxis x;
    ResampleAxis y;
    int origin_x = 0;  // the axes' pixel 0, in pixels of the image decoded at num/8
    int origin_y = 0;
  };
  class ResamplerRows;

  [[nodiscard]] ImageFormat checked_format(std::span<const std::byte> encoded) const;
  Size read_jpeg_header(std::span<const std::byte> encoded);
  cv::Mat decode_other(std::span<const std::byte> encoded);
  void render_jpeg(std::span<const std::byte> encoded, Size image, const Transform& t, std::uint8_t* out);
  void render_decoded(const cv::Mat& image, const Transform& t, std::uint8_t* out);
  const Axes& pillow_axes(Size image, const Transform& t, int num);
  JpegRegion decode_jpeg_box(std::span<const std::byte> encoded, const PixelBox& box, int num,
                             ResamplerRows* rows = nullptr);
  void record(Size image, const Transform& t);
  void check_pixels(std::uint64_t width, std::uint64_t height) const;

  JpegRegionDecoder jpeg_;                  // reused from image to image
  std::vector<std::uint8_t> region_;        // the decoded crop box, reused between samples
  RgbxResizer resizer_;                     // kFast: the box to the output, resized, mirrored, RGB
  PillowResampler pillow_;                  // the same as torchvision on PIL
  Axes axes_;                               // its plan for the current image, memory reused
  std::vector<std::byte> slice_;            // the headers of a JPEG with restart markers cut to the box's rows
  std::vector<ByteRange> slice_intervals_;  // where the slice's restart intervals lie in slice_unstuffed_
  std::vector<std::byte> slice_unstuffed_;  // their bytes, unstuffed (the slice holds its headers only)
};

ImageFormat ImageAugmenter::Engine::checked_format(std::span<const std::byte> encoded) const {
  if (encoded.empty()) throw ImageError(Problem::kEmpty, "no image bytes");
  const ImageFormat format = sniff_format(encoded);
  if (format == ImageFormat::kUnknown)
    throw ImageError(Problem::kUndecodable, "not a JPEG, PNG, PNM, BMP or WebP image");
  return format;
}

void ImageAugmenter::Engine::check_pixels(std::uint64_t width, std::uint64_t height) const {
  if (width == 0 || height == 0) throw ImageError(Problem::kUndecodable, "image of zero size");
  // Divided, not multiplied: a header can declare sizes whose product
  // overflows 64 bits.
  if (width > options_.max_pixels / height) {
    throw ImageError(Problem::kTooManyPixels, std::to_string(width) + "x" + std::to_string(height) + " exceeds " +
                                                  std::to_string(options_.max_pixels) + " pixels");
  }
}

Size ImageAugmenter::Engine::read_jpeg_header(std::span<const std::byte> encoded) {
  const JpegInfo info = jpeg_.read_header(encoded);
  check_pixels(static_cast<std::uint64_t>(info.width), static_cast<std::uint64_t>(info.height));
  return {info.width, info.height};
}

cv::Mat ImageAugmenter::Engine::decode_other(std::span<const std::byte> encoded) {
  // Checked before decoding: a PNG of a few hundred kilobytes can declare
  // gigabytes of pixels, and OpenCV's decoders of other formats are not for
  // outside input (see format.h).
  const auto declared = peek_image_size(encoded);
  if (!declared) throw ImageError(Problem::kUndecodable, "a malformed image header");
  check_pixels(declared->width, declared->height);
#if TENSORCOM_OPENCV_CODECS
  cv::Mat raw(1, static_cast<int>(encoded.size()), CV_8U, const_cast<std::byte*>(encoded.data()));
  cv::Mat image;
  const auto start = Clock::now();
  try {
    image = cv::imdecode(raw, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    throw ImageError(Problem::kUndecodable, e.what());
  }
  decode_time_ += Clock::now() - start;
#else
  // A JPEG-only build (-Dopencv_codecs=disabled) has no decoder for others.
  cv::Mat image;
  throw ImageError(Problem::kUndecodable, std::string(format_name(sniff_format(encoded))) +
                                              " image: this build decodes JPEG only (-Dopencv_codecs=disabled)");
#endif
  if (image.empty()) throw ImageError(Problem::kUndecodable, "not an image OpenCV can read");
  check_pixels(static_cast<std::uint64_t>(image.cols), static_cast<std::uint64_t>(image.rows));
  return image;
}

Transform ImageAugmenter::Engine::draw_transform(int width, int height, std::mt19937_64& rng) const {
  if (options_.validation) return resize_center_crop_transform(width, height, options_.resize, output_);
  const PixelBox box = random_resized_crop(width, height, options_.crop, rng);
  const bool flip =
      options_.flip_probability > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < options_.flip_probability;
  return resized_crop_transform(box, output_, flip);
}

void ImageAugmenter::Engine::record(Size image, const Transform& t) {
  const PixelBox shown = t.source_box();
  geometry_ = {shown.x, shown.y, shown.width, shown.height, t.flip, image.width, image.height};
}

void ImageAugmenter::Engine::augment(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out) {
  if (checked_format(encoded) == ImageFormat::kJpeg) {
    const Size image = read_jpeg_header(encoded);
    const Transform t = draw_transform(image.width, image.height, rng);
    check_fits(t, image.width, image.height);
    record(image, t);
    render_jpeg(encoded, image, t, out);
    return;
  }
  const cv::Mat decoded = decode_other(encoded);
  const Transform t = draw_transform(decoded.cols, decoded.rows, rng);
  check_fits(t, decoded.cols, decoded.rows);
  record({decoded.cols, decoded.rows}, t);
  render_decoded(decoded, t, out);
}

void ImageAugmenter::Engine::render(std::span<const std::byte> encoded, const Transform& t, std::uint8_t* out) {
  if (checked_format(encoded) == ImageFormat::kJpeg) {
    const Size image = read_jpeg_header(encoded);
    check_fits(t, image.width, image.height);
    record(image, t);
    render_jpeg(encoded, image, t, out);
    return;
  }
  const cv::Mat decoded = decode_other(encoded);
  check_fits(t, decoded.cols, decoded.rows);
  record({decoded.cols, decoded.rows}, t);
  render_decoded(decoded, t, out);
}

Size ImageAugmenter::Engine::read_size(std::span<const std::byte> encoded) const {
  (void)checked_format(encoded);
  const auto declared = peek_image_size(encoded);
  if (!declared) throw ImageError(Problem::kUndecodable, "a malformed image header");
  check_pixels(declared->width, declared->height);
  return {static_cast<int>(declared->width), static_cast<int>(declared->height)};
}

Size ImageAugmenter::Engine::decode(std::span<const std::byte> encoded,
                                    const std::function<std::uint8_t*(Size)>& output) {
  if (checked_format(encoded) == ImageFormat::kJpeg) {
    const Size image = read_jpeg_header(encoded);
    const JpegRegion region = decode_jpeg_box(encoded, {0, 0, image.width, image.height}, 8);
    std::uint8_t* out = output(image);
    const std::size_t row_bytes = static_cast<std::size_t>(image.width) * 3;
    for (int y = 0; y < image.height; ++y) {
      rgbx_to_rgb(region.pixels + static_cast<std::size_t>(y) * region.stride, image.width, 1, false,
                  out + static_cast<std::size_t>(y) * row_bytes);
    }
    return image;
  }
  const cv::Mat rgb = to_8bit(decode_other(encoded), false);
  const Size image{rgb.cols, rgb.rows};
  cv::Mat into(rgb.rows, rgb.cols, CV_8UC3, output(image));
  rgb.copyTo(into);
  return image;
}

// Hands a decoder's rows on to the resampler, shifted from the rows of the
// JPEG decoded (a slice's, when one was cut) to the resampler's, and timed:
// the decoding time reported leaves resampling out.
class ImageAugmenter::Engine::ResamplerRows final : public RowSink {
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

// Decodes `box` of the JPEG whose header was just read, at scale num/8,
// through its restart intervals when it has them. With `rows`, hands the
// rows to it as they are decoded instead of keeping them (the region
// returned has no pixels).
JpegRegion ImageAugmenter::Engine::decode_jpeg_box(std::span<const std::byte> encoded, const PixelBox& box, int num,
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
  ++jpeg_counts_.total;
  if (slice) ++jpeg_counts_.sliced;
  region.x += shift_x;
  region.y += shift_y;
  decode_time_ += Clock::now() - start - (rows ? rows->spent() : Clock::duration{});
  return region;
}

ImageAugmenter::DecodedCrop ImageAugmenter::Engine::decode_jpeg_crop(std::span<const std::byte> encoded,
                                                                     std::mt19937_64& rng, bool* flip) {
  if (checked_format(encoded) != ImageFormat::kJpeg) throw ImageError(Problem::kUndecodable, "not a JPEG");
  const Size image = read_jpeg_header(encoded);
  const Transform t = draw_transform(image.width, image.height, rng);
  *flip = t.flip;
  record(image, t);
  const PixelBox box = t.source_box();
  const JpegRegion region = decode_jpeg_box(encoded, box, choose_scale_num(box, t.output()));
  return {region.pixels, region.width, region.height, region.stride};
}

const ImageAugmenter::Engine::Axes& ImageAugmenter::Engine::pillow_axes(Size image, const Transform& t, int num) {
  const ResampleFilter filter =
      options_.resample == Resample::kBicubic ? ResampleFilter::kBicubic : ResampleFilter::kBilinear;
  Axes& a = axes_;
  plan_scaled_axis(a.x, filter, t.crop.x, t.crop.width, image.width, num, t.resized.width, t.window.x, t.window.width,
                   AxisPass::kHorizontal, &a.origin_x);
  plan_scaled_axis(a.y, filter, t.crop.y, t.crop.height, image.height, num, t.resized.height, t.window.y,
                   t.window.height, AxisPass::kVertical, &a.origin_y);
  return a;
}

void ImageAugmenter::Engine::render_jpeg(std::span<const std::byte> encoded, Size image, const Transform& t,
                                         std::uint8_t* out) {
  if (options_.resample == Resample::kFast) {
    const PixelBox box = t.source_box();
    const JpegRegion region = decode_jpeg_box(encoded, box, choose_scale_num(box, t.output()));
    resizer_.resize_to_rgb(region.pixels, region.width, region.height, region.stride, t.window.width, t.window.height,
                           t.flip, out);
    return;
  }
  const int num = choose_pillow_scale(t.crop.width, t.crop.height, t.resized);
  const Axes& axes = pillow_axes(image, t, num);
  // Only the pixels the taps read are decoded: the box of source pixels
  // whose num/8 scaling covers them.
  const int sx0 = axes.origin_x + axes.x.source_first(), sx1 = axes.origin_x + axes.x.source_end();
  const int sy0 = axes.origin_y + axes.y.source_first(), sy1 = axes.origin_y + axes.y.source_end();
  const int x0 = sx0 * 8 / num, y0 = sy0 * 8 / num;
  const int x1 = std::min((sx1 * 8 + num - 1) / num, image.width);
  const int y1 = std::min((sy1 * 8 + num - 1) / num, image.height);
  // Decoded rows go through the horizontal pass as they come. The decoder
  // starts its box at scaled column x0 * num / 8 (the slice's origin, a
  // multiple of 8, divides out whole).
  pillow_.begin(axes.x, axes.y, x0 * num / 8 - axes.origin_x, t.flip, PillowResampler::fastest());
  ResamplerRows rows(pillow_, -axes.origin_y);
  (void)decode_jpeg_box(encoded, PixelBox{x0, y0, x1 - x0, y1 - y0}, num, &rows);
  pillow_.finish(out);
}

void ImageAugmenter::Engine::render_decoded(const cv::Mat& image, const Transform& t, std::uint8_t* out) {
  if (options_.resample == Resample::kFast) {
    const PixelBox box = t.source_box();
    const cv::Mat rgb = to_8bit(image(cv::Rect(box.x, box.y, box.width, box.height)), false);
    resize_into(rgb, t.output(), t.flip, out);
    return;
  }
  const PixelBox& box = t.crop;
  const cv::Mat rgbx = to_8bit(image(cv::Rect(box.x, box.y, box.width, box.height)), true);
  const Axes& axes = pillow_axes({image.cols, image.rows}, t, 8);
  pillow_.resize_to_rgb(rgbx.ptr<std::uint8_t>(0), rgbx.step, box.x - axes.origin_x, box.y - axes.origin_y, axes.x,
                        axes.y, t.flip, out);
}

ImageAugmenter::ImageAugmenter(AugmentOptions options, Size output)
    : engine_(std::make_unique<Engine>(options, output)) {}
ImageAugmenter::~ImageAugmenter() = default;
ImageAugmenter::ImageAugmenter(ImageAugmenter&&) noexcept = default;
ImageAugmenter& ImageAugmenter::operator=(ImageAugmenter&&) noexcept = default;

void ImageAugmenter::augment(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out) {
  engine_->augment(encoded, rng, out);
}
void ImageAugmenter::render(std::span<const std::byte> encoded, const Transform& transform, std::uint8_t* out) {
  engine_->render(encoded, transform, out);
}
Transform ImageAugmenter::draw_transform(int width, int height, std::mt19937_64& rng) const {
  return engine_->draw_transform(width, height, rng);
}
Size ImageAugmenter::decode(std::span<const std::byte> encoded, const std::function<std::uint8_t*(Size)>& output) {
  return engine_->decode(encoded, output);
}
Size ImageAugmenter::read_size(std::span<const std::byte> encoded) const { return engine_->read_size(encoded); }
const SampleGeometry& ImageAugmenter::last_geometry() const noexcept { return engine_->geometry_; }
const AugmentOptions& ImageAugmenter::options() const noexcept { return engine_->options_; }
Size ImageAugmenter::output() const noexcept { return engine_->output_; }
ImageAugmenter::JpegCounts ImageAugmenter::jpeg_counts() const noexcept { return engine_->jpeg_counts_; }
Clock::duration ImageAugmenter::decode_time() const noexcept { return engine_->decode_time_; }
ImageAugmenter::DecodedCrop ImageAugmenter::decode_jpeg_crop(std::span<const std::byte> encoded, std::mt19937_64& rng,
                                                             bool* flip) {
  return engine_->decode_jpeg_crop(encoded, rng, flip);
}

}  // namespace tensorcom::imaging
