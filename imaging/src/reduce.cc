#include "tensorcom/imaging/reduce.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "jpeg/jpeg_encoder.h"
#include "tensorcom/imaging/format.h"

namespace tensorcom::imaging {

namespace {

AugmentOptions augment_options(const ReduceOptions& o) {
  if (o.max_side < 1 || o.max_side > 65535) {
    throw ArgumentError("max side " + std::to_string(o.max_side) + ": expected 1 to 65535");
  }
  if (o.quality < 1 || o.quality > 100)
    throw ArgumentError("quality " + std::to_string(o.quality) + ": expected 1 to 100");
  if (o.filter == Resample::kFast) throw ArgumentError("reduced copies are resized with bilinear or bicubic");
  AugmentOptions a;
  a.resample = o.filter;
  a.max_pixels = o.max_pixels;
  return a;
}

}  // namespace

Size reduced_size(int width, int height, int max_side) {
  const int longer = std::max(width, height);
  auto scaled = [&](int side) {
    if (side == longer) return max_side;
    return std::max(1, static_cast<int>(std::nearbyint(static_cast<double>(side) * max_side / longer)));
  };
  return {scaled(width), scaled(height)};
}

ImageReducer::ImageReducer(ReduceOptions options)
    : options_(options), augmenter_(augment_options(options), Size{1, 1}) {}

std::optional<ByteBuffer> ImageReducer::reduce(std::span<const std::byte> image) {
  if (sniff_format(image) != ImageFormat::kJpeg) return std::nullopt;
  const Size source = augmenter_.read_size(image);
  if (std::max(source.width, source.height) <= options_.max_side) return std::nullopt;
  const Size target = reduced_size(source.width, source.height, options_.max_side);
  const Transform whole{{0, 0, source.width, source.height}, target, {0, 0, target.width, target.height}, false};
  pixels_.resize(static_cast<std::size_t>(target.width) * static_cast<std::size_t>(target.height) * 3);
  augmenter_.render(image, whole, pixels_.data());
  return jpeg::encode_jpeg(pixels_.data(), target.width, target.height,
                           {options_.quality, options_.restart_markers, options_.optimize_huffman});
}

}  // namespace tensorcom::imaging
