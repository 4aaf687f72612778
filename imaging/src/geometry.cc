#include "tensorcom/imaging/geometry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tensorcom/codec/error.h"

namespace tensorcom::imaging {

namespace {

// Python's round(), which torchvision uses: halves go to the even neighbour.
int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

int uniform_int(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// The fallback: the whole image, narrowed to the allowed aspect ratios, centred.
PixelBox center_fallback(int width, int height, const RandomResizedCropOptions& o) {
  double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < o.ratio_min) {
    h = round_half_even(w / o.ratio_min);
  } else if (in_ratio > o.ratio_max) {
    w = round_half_even(h * o.ratio_max);
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

}  // namespace

PixelBox random_resized_crop(int width, int height, const RandomResizedCropOptions& o, std::mt19937_64& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_min = std::log(o.ratio_min), log_max = std::log(o.ratio_max);
  for (int attempt = 0; attempt < o.attempts; ++attempt) {
    double target_area = area * uniform(rng, o.scale_min, o.scale_max);
    double ratio = std::exp(uniform(rng, log_min, log_max));
    int w = round_half_even(std::sqrt(target_area * ratio));
    int h = round_half_even(std::sqrt(target_area / ratio));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      int y = uniform_int(rng, 0, height - h);
      int x = uniform_int(rng, 0, width - w);
      return {x, y, w, h};
    }
  }
  return center_fallback(width, height, o);
}

Size resized_size(int width, int height, const ResizeSpec& spec) {
  if (spec.shorter <= 0) return {spec.width, spec.height};
  const int shorter = std::min(width, height), longer = std::max(width, height);
  // int(size * long / short): Python multiplies the integers, then divides.
  int new_short = spec.shorter;
  const double exact_long = static_cast<double>(std::int64_t{spec.shorter} * longer) / shorter;
  // A 2^28 x 1 image resized to 256 on its shorter side would be 2^36 wide.
  if (exact_long >= static_cast<double>(std::numeric_limits<int>::max())) {
    throw ArgumentError("resizing a " + std::to_string(width) + "x" + std::to_string(height) + " image to " +
                        std::to_string(spec.shorter) + " on its shorter side makes it too long");
  }
  int new_long = static_cast<int>(exact_long);
  if (spec.max_size > 0 && new_long > spec.max_size) {
    new_short = static_cast<int>(static_cast<double>(std::int64_t{spec.max_size} * new_short) / new_long);
    new_long = spec.max_size;
  }
  return width <= height ? Size{new_short, new_long} : Size{new_long, new_short};
}

PixelBox center_crop(int width, int height, Size crop) {
  return {round_half_even((width - crop.width) / 2.0), round_half_even((height - crop.height) / 2.0), crop.width,
          crop.height};
}

PixelBox Transform::source_box() const noexcept {
  // Output column c of the resized crop reads around crop.x + (c + 0.5) * crop.width / resized.width.
  auto cover = [](int first, int count, int crop_first, int crop_len, int resized) {
    const double scale = static_cast<double>(crop_len) / resized;
    const int begin = std::clamp(static_cast<int>(std::floor(first * scale)), 0, crop_len - 1);
    const int end = std::clamp(static_cast<int>(std::ceil((first + count) * scale)), begin + 1, crop_len);
    return std::pair{crop_first + begin, end - begin};
  };
  const auto [x, w] = cover(window.x, window.width, crop.x, crop.width, resized.width);
  const auto [y, h] = cover(window.y, window.height, crop.y, crop.height, resized.height);
  return {x, y, w, h};
}

bool Transform::window_inside() const noexcept {
  return window.x >= 0 && window.y >= 0 && window.width > 0 && window.height > 0 &&
         window.x + window.width <= resized.width && window.y + window.height <= resized.height;
}

Transform resized_crop_transform(const PixelBox& box, Size output, bool flip) {
  return {box, output, {0, 0, output.width, output.height}, flip};
}

Transform resize_center_crop_transform(int width, int height, const ResizeSpec& spec, Size crop) {
  const Size resized = resized_size(width, height, spec);
  return {{0, 0, width, height}, resized, center_crop(resized.width, resized.height, crop), false};
}

Transform resize_transform(int width, int height, const ResizeSpec& spec) {
  const Size resized = resized_size(width, height, spec);
  return {{0, 0, width, height}, resized, {0, 0, resized.width, resized.height}, false};
}

}  // namespace tensorcom::imaging
