// Where to crop: torchvision's RandomResizedCrop and the validation
// resize-then-centre-crop, expressed as a box in the source image so that a
// decoder can decode only that box (and at a reduced DCT scale).
#pragma once

#include <cstdint>
#include <random>

namespace tensorcom::pipeline {

struct CropBox {
  int x = 0;  // left column in the source image
  int y = 0;  // top row
  int width = 0;
  int height = 0;
  bool operator==(const CropBox&) const = default;
};

struct RandomResizedCropOptions {
  double scale_min = 0.08;  // fraction of the source area, drawn uniformly
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;  // aspect ratio (width / height), drawn log-uniformly
  double ratio_max = 4.0 / 3.0;
  int attempts = 10;  // draws before the centre-crop fallback
};

// torchvision.transforms.RandomResizedCrop.get_params for a width x height
// image. REQUIRES width, height > 0.
[[nodiscard]] CropBox random_resized_crop(int width, int height, const RandomResizedCropOptions& options,
                                         std::mt19937_64& rng);

// The box that "resize the shorter side to resize_to, then centre-crop
// size x size" takes from a width x height image.
[[nodiscard]] CropBox center_crop_after_resize(int width, int height, int resize_to, int size);

}  // namespace tensorcom::pipeline
