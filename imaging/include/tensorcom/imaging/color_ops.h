// The colour operations of torchvision's augmentation policies and
// ColorJitter, in place on an RGB uint8 image, with Pillow's arithmetic:
// what torchvision's functional API gives for a PIL image (ImageEnhance's
// blends in single precision, truncated; ImageOps' lookup tables built in
// double precision; the luma of convert("L")). The servers and
// tensorcom.imaging apply them to a crop after it is resized, never to the
// whole image.
#pragma once

#include <cstdint>

namespace tensorcom::imaging {

// Packed rows of width * 3 bytes, R, G, B.
struct RgbImage {
  std::uint8_t* pixels;
  int width;
  int height;
};

// ImageOps.invert: 255 - v.
void invert(RgbImage image);
// ImageOps.posterize: keeps the top `bits` bits (1 to 8) of each value.
void posterize(RgbImage image, int bits);
// ImageOps.solarize: values at or above the threshold become 255 - v.
void solarize(RgbImage image, double threshold);
// timm's solarize_add: values below the threshold get `add` more, at most 255.
void solarize_add(RgbImage image, int add, int threshold);
// ImageOps.autocontrast (no cutoff): each channel stretched so that its
// lowest value becomes 0 and its highest 255.
void autocontrast(RgbImage image);
// ImageOps.equalize: each channel's histogram flattened.
void equalize(RgbImage image);

// ImageEnhance: a blend of the image with a degenerate image, factor 1
// keeping the image, 0 giving the degenerate one, above 1 extrapolating
// (clipped to 0..255).
// Brightness: the degenerate image is black.
void adjust_brightness(RgbImage image, double factor);
// Color (saturation): its greyscale version.
void adjust_saturation(RgbImage image, double factor);
// Contrast: grey at the greyscale image's mean, rounded to an integer.
void adjust_contrast(RgbImage image, double factor);
// Sharpness: the image smoothed by Pillow's SMOOTH 3x3 kernel, its border
// pixels left as they are.
void adjust_sharpness(RgbImage image, double factor);
// torchvision's adjust_hue on PIL: the hue of Pillow's HSV conversion
// turned by int(hue_factor * 255) of 256 (hue_factor in [-0.5, 0.5]), then
// back to RGB.
void adjust_hue(RgbImage image, double hue_factor);
// convert("L") then back to RGB: Pillow's luma (299/587/114 in 16-bit
// fixed point) in all three channels.
void to_grayscale(RgbImage image);

}  // namespace tensorcom::imaging
