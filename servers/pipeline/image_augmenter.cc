#include "image_augmenter.h"

#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cmath>

#include "image_header.h"
#include "jpeg_region.h"
#include "jpeg_restart_slice.h"

namespace tensorcom::pipeline {

namespace {

// The DCT scale (num/8) with the fewest pixels that still leaves the crop at
// least `size` pixels across both ways, so the resize only ever shrinks.
int choose_scale_num(const CropBox& box, int size) {
  for (int num : {1, 2, 4}) {
    if (box.width * num / 8 >= size && box.height * num / 8 >= size) return num;
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
    throw SampleError("undecodable", "unsupported pixel depth " + std::to_string(image.depth()));
  }
  cv::Mat out;
  switch (eight.channels()) {
    case 1: cv::cvtColor(eight, out, padded ? cv::COLOR_GRAY2RGBA : cv::COLOR_GRAY2RGB); break;
    case 3: cv::cvtColor(eight, out, padded ? cv::COLOR_BGR2RGBA : cv::COLOR_BGR2RGB); break;
    case 4: cv::cvtColor(eight, out, padded ? cv::COLOR_BGRA2RGBA : cv::COLOR_BGRA2RGB); break;
    default: throw SampleError("undecodable", std::to_string(eight.channels()) + " channels");
  }
  return out;
}

// Resizes src into the size x size output and flips it if asked.
void resize_into(const cv::Mat& src, int size, bool flip, std::uint8_t* out) {
  cv::Mat dst(size, size, CV_8UC3, out);
  cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_LINEAR);
  if (dst.data != out) throw Error("resize reallocated its output");  // cannot happen: same size and type
  if (flip) cv::flip(dst, dst, 1);
}

}  // namespace

std::optional<Resample> parse_resample(std::string_view name) noexcept {
  if (name == "bilinear") return Resample::kBilinear;
  if (name == "bicubic") return Resample::kBicubic;
  if (name == "fast") return Resample::kFast;
  return std::nullopt;
}

bool looks_like_jpeg(std::span<const std::byte> bytes) noexcept {
  return bytes.size() >= 3 && bytes[0] == std::byte{0xff} && bytes[1] == std::byte{0xd8} && bytes[2] == std::byte{0xff};
}

void configure_opencv_for_workers() {
  // Parallelism is ours: one image per worker thread. OpenCV's own pool would
  // split each small resize across threads that compete with the workers,
  // and wake them (futex calls) for every image.
  cv::setNumThreads(0);
  // Bad images are counted and reported by the server, rate-limited; OpenCV
  // would print a line of its own for each.
  cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
}

struct ImageAugmenter::Axes {
  ResampleAxis x;
  ResampleAxis y;
  int origin_x = 0;  // the axes' pixel 0, in pixels of the image decoded at num/8
  int origin_y = 0;
};

ImageAugmenter::ImageAugmenter(AugmentOptions options, int size)
    : options_(options),
      size_(size),
      resize_to_(static_cast<int>(std::lround(size * 256.0 / 224.0))),
      jpeg_(std::make_unique<JpegRegionDecoder>()),
      axes_(std::make_unique<Axes>()) {
  if (size_ <= 0) throw ArgumentError("image size must be positive");
}

ImageAugmenter::~ImageAugmenter() = default;
ImageAugmenter::ImageAugmenter(ImageAugmenter&&) noexcept = default;
ImageAugmenter& ImageAugmenter::operator=(ImageAugmenter&&) noexcept = default;

void ImageAugmenter::augment(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out) {
  if (encoded.empty()) throw SampleError("empty", "no image bytes");
  // The bytes decide the format: shards in the wild mislabel it.
  if (looks_like_jpeg(encoded)) {
    augment_jpeg(encoded, rng, out);
  } else {
    augment_other(encoded, rng, out);
  }
}

CropBox ImageAugmenter::choose_crop(int width, int height, std::mt19937_64& rng) const {
  if (options_.validation) return center_crop_after_resize(width, height, resize_to_, size_);
  return random_resized_crop(width, height, options_.crop, rng);
}

void ImageAugmenter::record(int width, int height, const CropBox& box, bool flip) {
  // For --val the box is what the centre crop covers of the source.
  const CropBox shown = options_.validation ? center_crop_after_resize(width, height, resize_to_, size_) : box;
  geometry_ = {shown.x, shown.y, shown.width, shown.height, flip, width, height};
}

bool ImageAugmenter::draw_flip(std::mt19937_64& rng) const {
  if (options_.validation || options_.flip_probability <= 0) return false;
  return std::uniform_real_distribution<double>(0, 1)(rng) < options_.flip_probability;
}

void ImageAugmenter::check_pixels(std::uint64_t width, std::uint64_t height) const {
  if (width == 0 || height == 0) throw SampleError("undecodable", "image of zero size");
  // Divided, not multiplied: a header can declare sizes whose product
  // overflows 64 bits.
  if (width > options_.max_pixels / height) {
    throw SampleError("too many pixels", std::to_string(width) + "x" + std::to_string(height) + " exceeds " +
                                             std::to_string(options_.max_pixels) + " pixels");
  }
}

// Hands a decoder's rows on to the resampler, shifted from the rows of the
// JPEG decoded (a slice's, when one was cut) to the resampler's, and timed:
// the decoding time the servers report leaves resampling out.
class ImageAugmenter::ResamplerRows final : public RowSink {
 public:
  ResamplerRows(PillowResampler& to, int shift) : to_(to), shift_(shift) {}
  void shift_by(int rows) { shift_ += rows; }
  [[nodiscard]] std::chrono::steady_clock::duration spent() const { return spent_; }

  void take_rows(const std::uint8_t* pixels, std::size_t stride, int first_row, int count) noexcept override {
    const auto start = std::chrono::steady_clock::now();
    to_.take_rows(pixels, stride, first_row + shift_, count);
    spent_ += std::chrono::steady_clock::now() - start;
  }

 private:
  PillowResampler& to_;
  int shift_;
  std::chrono::steady_clock::duration spent_{};
};

JpegRegion ImageAugmenter::decode_jpeg_box(std::span<const std::byte> encoded, const CropBox& box, int num,
                                           ResamplerRows* rows) {
  const auto start = std::chrono::steady_clock::now();
  PixelBox origin;  // of the decoded JPEG in the source: a slice of it, when it has restart markers to cut at
  const auto slice = slice_restart_intervals(encoded, {box.x, box.y, box.width, box.height}, decoder_context(num),
                                             slice_, &slice_intervals_, &slice_unstuffed_);
  if (slice) {
    (void)jpeg_->read_header(slice_);
    origin = *slice;
  }
  // The slice starts on an MCU boundary, a multiple of 8 pixels: num/8 of it is whole.
  const int shift_x = origin.x * num / 8, shift_y = origin.y * num / 8;
  const int x = box.x - origin.x, y = box.y - origin.y;
  const std::span<const ByteRange> intervals = slice ? std::span<const ByteRange>(slice_intervals_) : std::span<const ByteRange>();
  const std::span<const std::byte> unstuffed = slice ? std::span<const std::byte>(slice_unstuffed_) : std::span<const std::byte>();
  JpegRegion region;
  if (rows) {
    rows->shift_by(shift_y);
    region = jpeg_->decode_rows(x, y, box.width, box.height, num, region_, *rows, intervals, unstuffed);
  } else {
    region = jpeg_->decode(x, y, box.width, box.height, num, region_, intervals, unstuffed);
  }
  ++jpeg_counts_.total;
  if (slice) ++jpeg_counts_.sliced;
  region.x += shift_x;
  region.y += shift_y;
  decode_time_ += std::chrono::steady_clock::now() - start - (rows ? rows->spent() : std::chrono::steady_clock::duration{});
  return region;
}

ImageAugmenter::DecodedCrop ImageAugmenter::decode_jpeg_crop(std::span<const std::byte> encoded, std::mt19937_64& rng,
                                                             bool* flip) {
  JpegInfo info = jpeg_->read_header(encoded);
  check_pixels(static_cast<std::uint64_t>(info.width), static_cast<std::uint64_t>(info.height));
  CropBox box = choose_crop(info.width, info.height, rng);
  *flip = draw_flip(rng);
  record(info.width, info.height, box, *flip);
  JpegRegion region = decode_jpeg_box(encoded, box, choose_scale_num(box, size_));
  return {region.pixels, region.width, region.height, region.stride};
}

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

int ImageAugmenter::choose_pillow_scale(int span_w, int span_h, int out_w, int out_h) const {
  // Pillow's antialiasing filter spans the shrink factor; a DCT-scaled decode
  // first shrinks by num/8 with a different (sharper) lowpass. Where enough
  // shrinking is left for Pillow's filter to do, the two agree closely (the
  // fidelity tests and tests/bench/fidelity_photos.py measure how closely).
  for (int num = 1; num < 8; ++num) {
    if (span_w * num >= kDctShrinkLeft * 8 * out_w && span_h * num >= kDctShrinkLeft * 8 * out_h) return num;
  }
  return 8;
}

const ImageAugmenter::Axes& ImageAugmenter::pillow_axes(int width, int height, const CropBox& box, int num) {
  const ResampleFilter filter =
      options_.resample == Resample::kBicubic ? ResampleFilter::kBicubic : ResampleFilter::kBilinear;
  Axes& a = *axes_;
  if (!options_.validation) {
    plan_scaled_axis(a.x, filter, box.x, box.width, width, num, size_, 0, size_, AxisPass::kHorizontal, &a.origin_x);
    plan_scaled_axis(a.y, filter, box.y, box.height, height, num, size_, 0, size_, AxisPass::kVertical, &a.origin_y);
    return a;
  }
  // torchvision's Resize(resize_to): the shorter side becomes resize_to, the
  // longer int(resize_to * long / short); then CenterCrop(size) starts at
  // int(round((new - size) / 2.0)), Python's round (half to even).
  const ResizedImage r = resized_for_validation(width, height);
  plan_scaled_axis(a.x, filter, 0, width, width, num, r.width, r.left, size_, AxisPass::kHorizontal, &a.origin_x);
  plan_scaled_axis(a.y, filter, 0, height, height, num, r.height, r.top, size_, AxisPass::kVertical, &a.origin_y);
  return a;
}

ImageAugmenter::ResizedImage ImageAugmenter::resized_for_validation(int width, int height) const {
  const int shorter = std::min(width, height), longer = std::max(width, height);
  const int new_long = static_cast<int>(static_cast<double>(std::int64_t{resize_to_} * longer) / shorter);
  const int new_w = width <= height ? resize_to_ : new_long;
  const int new_h = width <= height ? new_long : resize_to_;
  return {new_w, new_h, static_cast<int>(std::nearbyint((new_w - size_) / 2.0)),
          static_cast<int>(std::nearbyint((new_h - size_) / 2.0))};
}

void ImageAugmenter::augment_jpeg_as_pillow(std::span<const std::byte> encoded, std::mt19937_64& rng,
                                            std::uint8_t* out) {
  JpegInfo info = jpeg_->read_header(encoded);
  check_pixels(static_cast<std::uint64_t>(info.width), static_cast<std::uint64_t>(info.height));
  const CropBox box = options_.validation ? CropBox{0, 0, info.width, info.height} : choose_crop(info.width, info.height, rng);
  const bool flip = draw_flip(rng);
  record(info.width, info.height, box, flip);
  int num = 8;
  if (options_.validation) {
    const ResizedImage r = resized_for_validation(info.width, info.height);
    num = choose_pillow_scale(info.width, info.height, r.width, r.height);
  } else {
    num = choose_pillow_scale(box.width, box.height, size_, size_);
  }
  const Axes& axes = pillow_axes(info.width, info.height, box, num);
  // Only the pixels the taps read are decoded: the box of source pixels
  // whose num/8 scaling covers them.
  const int sx0 = axes.origin_x + axes.x.source_first(), sx1 = axes.origin_x + axes.x.source_end();
  const int sy0 = axes.origin_y + axes.y.source_first(), sy1 = axes.origin_y + axes.y.source_end();
  const int x0 = sx0 * 8 / num, y0 = sy0 * 8 / num;
  const int x1 = std::min((sx1 * 8 + num - 1) / num, info.width), y1 = std::min((sy1 * 8 + num - 1) / num, info.height);
  // Decoded rows go through the horizontal pass as they come. The decoder
  // starts its box at scaled column x0 * num / 8 (the slice's origin, a
  // multiple of 8, divides out whole).
  pillow_.begin(axes.x, axes.y, x0 * num / 8 - axes.origin_x, flip, PillowResampler::fastest());
  ResamplerRows rows(pillow_, -axes.origin_y);
  (void)decode_jpeg_box(encoded, CropBox{x0, y0, x1 - x0, y1 - y0}, num, &rows);
  pillow_.finish(out);
}

void ImageAugmenter::augment_jpeg(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out) {
  if (options_.resample != Resample::kFast) return augment_jpeg_as_pillow(encoded, rng, out);
  bool flip = false;
  DecodedCrop crop = decode_jpeg_crop(encoded, rng, &flip);
  resizer_.resize_to_rgb(crop.rgbx, crop.width, crop.height, crop.stride, size_, size_, flip, out);
}

void ImageAugmenter::augment_other(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out) {
  // Checked before decoding: a PNG of a few hundred kilobytes can declare
  // gigabytes of pixels, and OpenCV's decoders of other formats are not for
  // outside input (see image_header.h).
  auto declared = peek_image_size(encoded);
  if (!declared) throw SampleError("undecodable", "not a JPEG, PNG, PNM, BMP or WebP image");
  check_pixels(declared->width, declared->height);
  cv::Mat raw(1, static_cast<int>(encoded.size()), CV_8U, const_cast<std::byte*>(encoded.data()));
  cv::Mat image;
  const auto start = std::chrono::steady_clock::now();
  try {
    image = cv::imdecode(raw, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    throw SampleError("undecodable", e.what());
  }
  decode_time_ += std::chrono::steady_clock::now() - start;
  if (image.empty()) throw SampleError("undecodable", "not an image OpenCV can read");
  check_pixels(static_cast<std::uint64_t>(image.cols), static_cast<std::uint64_t>(image.rows));
  CropBox box = choose_crop(image.cols, image.rows, rng);
  bool flip = draw_flip(rng);
  record(image.cols, image.rows, box, flip);
  if (options_.resample == Resample::kFast) {
    cv::Mat rgb = to_8bit(image(cv::Rect(box.x, box.y, box.width, box.height)), false);
    resize_into(rgb, size_, flip, out);
    return;
  }
  if (options_.validation) box = {0, 0, image.cols, image.rows};
  cv::Mat rgbx = to_8bit(image(cv::Rect(box.x, box.y, box.width, box.height)), true);
  const Axes& axes = pillow_axes(image.cols, image.rows, box, 8);
  pillow_.resize_to_rgb(rgbx.ptr<std::uint8_t>(0), rgbx.step, box.x - axes.origin_x, box.y - axes.origin_y, axes.x,
                        axes.y, flip, out);
}

}  // namespace tensorcom::pipeline
