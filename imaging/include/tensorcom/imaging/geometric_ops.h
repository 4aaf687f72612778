// The geometric operations of torchvision's augmentation policies (ShearX,
// ShearY, TranslateX, TranslateY, Rotate), as torchvision's functional
// affine() and rotate() compute them on a PIL image: the inverse matrix in
// double precision, then Pillow's AFFINE transform (nearest neighbour in
// 16.16 fixed point, or its bilinear filter), the output the input's size,
// uncovered pixels the fill colour. Each works on an RgbImage in place,
// through `scratch` (kept by the caller between images).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tensorcom/imaging/color_ops.h"

namespace tensorcom::imaging {

enum class PolicyInterpolation { kNearest, kBilinear, kBicubic };

// "nearest", "bilinear" or "bicubic"; nothing for any other name.
[[nodiscard]] std::optional<PolicyInterpolation> parse_policy_interpolation(std::string_view name) noexcept;

using FillColor = std::array<std::uint8_t, 3>;

struct GeometricOptions {
  PolicyInterpolation interpolation = PolicyInterpolation::kNearest;
  FillColor fill{0, 0, 0};
};

// magnitude: the shear factor (x' = x + magnitude * y, about the top-left
// corner), as torchvision's policies pass it.
void shear_x(RgbImage image, double magnitude, const GeometricOptions& options, std::vector<std::uint8_t>& scratch);
void shear_y(RgbImage image, double magnitude, const GeometricOptions& options, std::vector<std::uint8_t>& scratch);
// pixels: the shift, truncated towards zero as torchvision's int() does.
void translate_x(RgbImage image, double pixels, const GeometricOptions& options, std::vector<std::uint8_t>& scratch);
void translate_y(RgbImage image, double pixels, const GeometricOptions& options, std::vector<std::uint8_t>& scratch);
// degrees: counter-clockwise about the centre, the image's size kept.
void rotate(RgbImage image, double degrees, const GeometricOptions& options, std::vector<std::uint8_t>& scratch);

// Pillow's Image.transform(size, AFFINE, matrix, resample, fillcolor) itself:
// output pixel (x, y) takes the input at (m0 x + m1 y + m2, m3 x + m4 y + m5)
// (pixel centres), as timm's operations call it.
void pil_affine(RgbImage image, const std::array<double, 6>& matrix, const GeometricOptions& options,
                std::vector<std::uint8_t>& scratch);

}  // namespace tensorcom::imaging
