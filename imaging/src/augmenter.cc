#include "tensorcom/imaging/augmenter.h"

#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>

#include <cmath>
#include <vector>

#include "decoders/image_decoder.h"
#include "decoders/jpeg_decoder.h"
#include "decoders/opencv_decoder.h"
#include "tensorcom/imaging/format.h"

namespace tensorcom::imaging {

namespace {

using Clock = std::chrono::steady_clock;

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
  Engine(AugmentOptions options, Size output)
      : options_(normalised(options, output)), output_(output), context_(options_), jpeg_(context_), other_(context_) {
    if (output.width <= 0 || output.height <= 0) throw ArgumentError("image size must be positive");
    if (options_.auto_augment) policy_.emplace(*options_.auto_augment);
    if (options_.erasing) check_random_erasing(*options_.erasing);
  }

  void augment(std::span<const std::byte> encoded, std::mt19937_64& rng, std::uint8_t* out) {
    ImageDecoder& decoder = decoder_for(encoded);
    const Size image = decoder.open(encoded);
    const Transform t = draw_transform(image.width, image.height, rng);
    check_fits(t, image.width, image.height);
    record(image, t);
    decoder.render(encoded, t, out);
    if (!options_.validation) {
      apply_pixel_ops(rng, out);
      draw_erasing(rng);
    }
  }

  void render(std::span<const std::byte> encoded, const Transform& t, std::uint8_t* out) {
    ImageDecoder& decoder = decoder_for(encoded);
    const Size image = decoder.open(encoded);
    check_fits(t, image.width, image.height);
    record(image, t);
    decoder.render(encoded, t, out);
  }

  [[nodiscard]] Transform draw_transform(int width, int height, std::mt19937_64& rng) const {
    if (options_.validation) return resize_center_crop_transform(width, height, options_.resize, output_);
    const PixelBox box = random_resized_crop(width, height, options_.crop, rng);
    const bool flip =
        options_.flip_probability > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < options_.flip_probability;
    return resized_crop_transform(box, output_, flip);
  }

  Size decode(std::span<const std::byte> encoded, const std::function<std::uint8_t*(Size)>& output) {
    ImageDecoder& decoder = decoder_for(encoded);
    const Size image = decoder.open(encoded);
    decoder.decode_whole(encoded, output(image));
    return image;
  }

  [[nodiscard]] Size read_size(std::span<const std::byte> encoded) const {
    (void)checked_format(encoded);
    const auto declared = peek_image_size(encoded);
    if (!declared) throw ImageError(Problem::kUndecodable, "a malformed image header");
    context_.check_pixels(declared->width, declared->height);
    return {static_cast<int>(declared->width), static_cast<int>(declared->height)};
  }

  DecodedCrop decode_jpeg_crop(std::span<const std::byte> encoded, std::mt19937_64& rng, bool* flip) {
    if (checked_format(encoded) != ImageFormat::kJpeg) throw ImageError(Problem::kUndecodable, "not a JPEG");
    const Size image = jpeg_.open(encoded);
    const Transform t = draw_transform(image.width, image.height, rng);
    *flip = t.flip;
    record(image, t);
    const JpegRegion region = jpeg_.decode_crop(encoded, t);
    return {region.pixels, region.width, region.height, region.stride};
  }

  [[nodiscard]] const AugmentOptions& options() const noexcept { return options_; }
  [[nodiscard]] Size output() const noexcept { return output_; }
  [[nodiscard]] const SampleGeometry& geometry() const noexcept { return geometry_; }
  [[nodiscard]] JpegCounts jpeg_counts() const noexcept { return jpeg_.counts(); }
  [[nodiscard]] Clock::duration decode_time() const noexcept { return context_.decode_time; }

 private:
  // Validation's Resize defaults to the shorter side round(side * 256 / 224).
  static AugmentOptions normalised(AugmentOptions options, Size output) {
    if (options.resize.shorter <= 0 && (options.resize.width <= 0 || options.resize.height <= 0)) {
      options.resize.shorter = static_cast<int>(std::lround(std::min(output.width, output.height) * 256.0 / 224.0));
    }
    return options;
  }

  [[nodiscard]] static ImageFormat checked_format(std::span<const std::byte> encoded) {
    if (encoded.empty()) throw ImageError(Problem::kEmpty, "no image bytes");
    const ImageFormat format = sniff_format(encoded);
    if (format == ImageFormat::kUnknown)
      throw ImageError(Problem::kUndecodable, "not a JPEG, PNG, PNM, BMP or WebP image");
    return format;
  }

  // The first decoder that takes the bytes' format.
  ImageDecoder& decoder_for(std::span<const std::byte> encoded) {
    const ImageFormat format = checked_format(encoded);
    for (ImageDecoder* decoder : {static_cast<ImageDecoder*>(&jpeg_), static_cast<ImageDecoder*>(&other_)}) {
      if (decoder->can_decode(format)) return *decoder;
    }
    throw ImageError(Problem::kUndecodable, std::string(format_name(format)) + " image: no decoder for it");
  }

  void record(Size image, const Transform& t) {
    const PixelBox shown = t.source_box();
    geometry_ = {shown.x, shown.y, shown.width, shown.height, t.flip, image.width, image.height, {}, std::nullopt, 0};
  }

  void draw_erasing(std::mt19937_64& rng) {
    if (!options_.erasing) return;
    geometry_.erase = draw_erase_box(output_.width, output_.height, *options_.erasing, rng);
    if (geometry_.erase && options_.erasing->random_values) geometry_.erase_seed = rng() | 1;  // 0: zeros
  }

  // The policy's operations, then ColorJitter's and RandomGrayscale's,
  // drawn in that order after the crop's draws.
  void apply_pixel_ops(std::mt19937_64& rng, std::uint8_t* out) {
    std::vector<AppliedOp> ops;
    if (policy_) ops = policy_->draw(output_.width, output_.height, rng);
    if (options_.color_jitter || options_.grayscale_probability > 0) {
      draw_color_jitter(options_.color_jitter.value_or(ColorJitterOptions{}), options_.grayscale_probability, rng, ops);
    }
    if (ops.empty()) return;
    const GeometricOptions geometric = policy_ ? policy_->options().geometric : GeometricOptions{};
    apply_ops(ops, {out, output_.width, output_.height}, geometric, policy_scratch_);
    for (const AppliedOp& op : ops) geometry_.ops.push_back({recorded_op_name(op), op.magnitude});
  }

  AugmentOptions options_;
  Size output_;
  DecodeContext context_;
  JpegDecoder jpeg_;
  OpenCvDecoder other_;
  SampleGeometry geometry_;
  std::optional<AutoAugmentPolicy> policy_;
  std::vector<std::uint8_t> policy_scratch_;  // the geometric operations' copy of the crop
};

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
const SampleGeometry& ImageAugmenter::last_geometry() const noexcept { return engine_->geometry(); }
const AugmentOptions& ImageAugmenter::options() const noexcept { return engine_->options(); }
Size ImageAugmenter::output() const noexcept { return engine_->output(); }
ImageAugmenter::JpegCounts ImageAugmenter::jpeg_counts() const noexcept { return engine_->jpeg_counts(); }
Clock::duration ImageAugmenter::decode_time() const noexcept { return engine_->decode_time(); }
ImageAugmenter::DecodedCrop ImageAugmenter::decode_jpeg_crop(std::span<const std::byte> encoded, std::mt19937_64& rng,
                                                             bool* flip) {
  return engine_->decode_jpeg_crop(encoded, rng, flip);
}

}  // namespace tensorcom::imaging
