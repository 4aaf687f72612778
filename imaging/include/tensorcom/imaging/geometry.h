// torchvision's crop geometry, as boxes in the source image, so that a
// decoder can decode only the pixels a transform reads (and at a reduced
// DCT scale): RandomResizedCrop's sampling, and Resize + CenterCrop. Each is
// computed here and nowhere else.
#pragma once

#include <cstdint>
#include <random>

namespace tensorcom::imaging {

// A rectangle of pixels: left column, top row, width, height.
struct PixelBox {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  bool operator==(const PixelBox&) const = default;
};

struct RandomResizedCropOptions {
  double scale_min = 0.08;  // fraction of the source area, drawn uniformly
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;  // aspect ratio (width / height), drawn log-uniformly
  double ratio_max = 4.0 / 3.0;
  int attempts = 10;  // draws before the centre-crop fallback
};

// torchvision.transforms.RandomResizedCrop.get_params for a width x height
// image (the same draws in the same order, from rng instead of torch's).
// REQUIRES: width, height > 0.
[[nodiscard]] PixelBox random_resized_crop(int width, int height, const RandomResizedCropOptions& options,
                                           std::mt19937_64& rng);

// torchvision.transforms.Resize's `size`.
struct ResizeSpec {
  int shorter = 0;  // Resize(int): the shorter side becomes this, the longer keeps the aspect ratio
  int width = 0;    // Resize((h, w)), when shorter is 0: exactly width x height
  int height = 0;
  int max_size = 0;  // with shorter: the longer side at most this (0: no bound)
};

struct Size {
  int width = 0;
  int height = 0;
  bool operator==(const Size&) const = default;
};

// What Resize(spec) makes of a width x height image (torchvision's
// _compute_resized_output_size). REQUIRES: width, height > 0 and the spec
// set (shorter > 0, or width and height > 0). Throws ArgumentError when the
// longer side would not fit an int.
[[nodiscard]] Size resized_size(int width, int height, const ResizeSpec& spec);

// Where CenterCrop(crop) cuts a width x height image: left and top are
// int(round((side - crop) / 2.0)), Python's round. Negative where the crop
// is larger than the image (torchvision pads such images with zeros first).
[[nodiscard]] PixelBox center_crop(int width, int height, Size crop);

// One image's whole transform, once its size is known: the source pixels
// `crop` are resized to `resized`, and the output is the pixels `window` of
// that (CenterCrop's window, or all of it), mirrored when `flip`. Resizing
// is separable, so only the window's pixels are ever computed.
struct Transform {
  PixelBox crop;
  Size resized;
  PixelBox window;
  bool flip = false;

  [[nodiscard]] Size output() const noexcept { return {window.width, window.height}; }
  // The source pixels the window covers (rounded outwards): the crop
  // itself when the window is the whole resized crop.
  [[nodiscard]] PixelBox source_box() const noexcept;
  // Whether the window lies inside the resized crop (CenterCrop larger than
  // the resized image makes one that does not).
  [[nodiscard]] bool window_inside() const noexcept;
};

// RandomResizedCrop(output) of the box, then a flip when asked.
[[nodiscard]] Transform resized_crop_transform(const PixelBox& box, Size output, bool flip);
// Resize(spec) of a width x height image, then CenterCrop(crop).
[[nodiscard]] Transform resize_center_crop_transform(int width, int height, const ResizeSpec& spec, Size crop);
// Resize(spec) alone: the output is the whole resized image.
[[nodiscard]] Transform resize_transform(int width, int height, const ResizeSpec& spec);

}  // namespace tensorcom::imaging
