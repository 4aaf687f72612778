#include "crop.h"

#include <algorithm>
#include <cmath>

namespace tensorcom::pipeline {

namespace {

// Python's round(), which torchvision uses: halves go to the even neighbour.
int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

double uniform(std::mt19937_64& rng, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

int uniform_int(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// The fallback: the whole image, narrowed to the allowed aspect ratios, centred.
CropBox center_fallback(int width, int height, const RandomResizedCropOptions& o) {
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

CropBox random_resized_crop(int width, int height, const RandomResizedCropOptions& o, std::mt19937_64& rng) {
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

CropBox center_crop_after_resize(int width, int height, int resize_to, int size) {
  // The shorter side becomes resize_to; a size-pixel crop of the result
  // covers size / scale source pixels.
  double scale = static_cast<double>(resize_to) / std::min(width, height);
  int w = std::min(width, static_cast<int>(std::lround(size / scale)));
  int h = std::min(height, static_cast<int>(std::lround(size / scale)));
  w = std::max(w, 1);
  h = std::max(h, 1);
  return {(width - w) / 2, (height - h) / 2, w, h};
}

}  // namespace tensorcom::pipeline
