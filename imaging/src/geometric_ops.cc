#include "tensorcom/imaging/geometric_ops.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace tensorcom::imaging {

namespace {

// The six coefficients of Pillow's AFFINE data: output pixel (x, y) takes
// the input at (m0 x + m1 y + m2, m3 x + m4 y + m5).
using Matrix = std::array<double, 6>;

constexpr double kDegreesToRadians = M_PI / 180.0;
constexpr double kRadiansToDegrees = 180.0 / M_PI;

std::size_t byte_count(RgbImage image) {
  return static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height) * 3;
}

// torchvision's _get_inverse_affine_matrix, step by step as it evaluates it
// (every rounding is Python's double arithmetic, in its order).
Matrix inverse_affine(double cx, double cy, double angle, double tx, double ty, double shear_x_deg,
                      double shear_y_deg) {
  const double rot = angle * kDegreesToRadians;
  const double sx = shear_x_deg * kDegreesToRadians;
  const double sy = shear_y_deg * kDegreesToRadians;
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = ((-std::cos(rot - sy)) * std::tan(sx)) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = ((-std::sin(rot - sy)) * std::tan(sx)) / std::cos(sy) + std::cos(rot);
  Matrix m{d, -b, 0.0, -c, a, 0.0};  // divided by scale 1.0: unchanged
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
  return m;
}

// Python's round(x, 15): the nearest double to x's decimal rounding.
double round15(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.15f", x);
  return std::strtod(text, nullptr);
}

// Python's a % 360.0.
double modulo_360(double a) {
  double m = std::fmod(a, 360.0);
  if (m == 0.0) return 0.0;
  return m < 0 ? m + 360.0 : m;
}

// Pillow's FLOOR and COORD, saturating where a coordinate (from a huge
// shift a caller may give) would not fit an int: such a pixel is outside
// the image either way.
constexpr double kIntLimit = 2147483647.0;
int floor_int(double v) {
  if (!(v > -kIntLimit)) return std::numeric_limits<int>::min();
  if (v >= kIntLimit) return std::numeric_limits<int>::max();
  return v < 0.0 ? static_cast<int>(std::floor(v)) : static_cast<int>(v);
}
int coord(double v) {
  if (v < 0.0) return -1;
  return v >= kIntLimit ? std::numeric_limits<int>::max() : static_cast<int>(v);
}

void fill_all(RgbImage image, const FillColor& fill) {
  std::uint8_t* p = image.pixels;
  for (std::size_t i = 0, n = byte_count(image); i < n; i += 3) std::memcpy(p + i, fill.data(), 3);
}

void copy_pixel(const std::uint8_t* in, int width, int x, int y, std::uint8_t* out) {
  std::memcpy(out, in + (static_cast<std::size_t>(y) * width + x) * 3, 3);
}

// ImagingScaleAffine: nearest neighbour without rotation or shear; columns
// and rows from running double sums, truncated.
void scale_affine(const std::uint8_t* in, RgbImage out, const Matrix& a) {
  const int w = out.width, h = out.height;
  std::vector<int> column(static_cast<std::size_t>(w), -1);
  double xo = a[2] + a[0] * 0.5;
  for (int x = 0; x < w; ++x) {
    const int xin = coord(xo);
    if (xin >= 0 && xin < w) column[x] = xin;
    xo += a[0];
  }
  double yo = a[5] + a[4] * 0.5;
  for (int y = 0; y < h; ++y) {
    const int yin = coord(yo);
    yo += a[4];
    if (yin < 0 || yin >= h) continue;
    std::uint8_t* row = out.pixels + static_cast<std::size_t>(y) * w * 3;
    for (int x = 0; x < w; ++x) {
      if (column[x] >= 0) copy_pixel(in, w, column[x], yin, row + static_cast<std::size_t>(x) * 3);
    }
  }
}

bool fits_fixed_point(const Matrix& a, double x, double y) {
  return std::fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && std::fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

// affine_fixed: nearest neighbour in 16.16 fixed point from the pixel
// centres, incremented along rows and columns. The sums wrap as Pillow's
// ints do in practice (one step past the last row or column may pass
// 2^31): kept unsigned, where wrapping is defined, and read back signed.
void affine_fixed(const std::uint8_t* in, RgbImage out, const Matrix& a) {
  const auto fix = [](double v) {
    return static_cast<std::uint32_t>(static_cast<std::int32_t>(floor_int(v * 65536.0 + 0.5)));
  };
  const std::uint32_t a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
  std::uint32_t a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5);
  std::uint32_t a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
  const int w = out.width, h = out.height;
  for (int y = 0; y < h; ++y) {
    std::uint32_t xx = a2, yy = a5;
    std::uint8_t* row = out.pixels + static_cast<std::size_t>(y) * w * 3;
    for (int x = 0; x < w; ++x) {
      const int xin = static_cast<std::int32_t>(xx) >> 16, yin = static_cast<std::int32_t>(yy) >> 16;
      if (xin >= 0 && xin < w && yin >= 0 && yin < h)
        copy_pixel(in, w, xin, yin, row + static_cast<std::size_t>(x) * 3);
      xx += a0;
      yy += a3;
    }
    a2 += a1;
    a5 += a4;
  }
}

// The double-precision nearest neighbour Pillow falls back to when a
// corner lies beyond fixed point's range.
void affine_nearest_double(const std::uint8_t* in, RgbImage out, const Matrix& a) {
  const int w = out.width, h = out.height;
  double xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
  double yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
  for (int y = 0; y < h; ++y) {
    double xx = xo, yy = yo;
    std::uint8_t* row = out.pixels + static_cast<std::size_t>(y) * w * 3;
    for (int x = 0; x < w; ++x) {
      const int xin = coord(xx), yin = coord(yy);
      if (xin >= 0 && xin < w && yin >= 0 && yin < h)
        copy_pixel(in, w, xin, yin, row + static_cast<std::size_t>(x) * 3);
      xx += a[0];
      yy += a[3];
    }
    xo += a[1];
    yo += a[4];
  }
}

// Pillow's bilinear_filter32RGB at (xin, yin); false outside the image.
// Columns clamp to the image; the second row is used only where it exists.
bool bilinear_pixel(const std::uint8_t* in, int w, int h, double xin, double yin, std::uint8_t* out) {
  if (xin < 0.0 || xin >= w || yin < 0.0 || yin >= h) return false;
  xin -= 0.5;
  yin -= 0.5;
  const int x = floor_int(xin), y = floor_int(yin);
  const double dx = xin - x, dy = yin - y;
  const std::size_t row = static_cast<std::size_t>(w) * 3;
  const std::size_t xa = static_cast<std::size_t>(std::clamp(x, 0, w - 1)) * 3;
  const std::size_t xb = static_cast<std::size_t>(std::clamp(x + 1, 0, w - 1)) * 3;
  const std::uint8_t* top = in + static_cast<std::size_t>(std::clamp(y, 0, h - 1)) * row;
  const std::uint8_t* below = y + 1 >= 0 && y + 1 < h ? in + static_cast<std::size_t>(y + 1) * row : nullptr;
  for (std::size_t b = 0; b < 3; ++b) {
    const int pa = top[xa + b], pb = top[xb + b];
    double v1 = pa + (pb - pa) * dx;
    double v2 = v1;
    if (below) {
      const int qa = below[xa + b], qb = below[xb + b];
      v2 = qa + (qb - qa) * dx;
    }
    v1 = v1 + (v2 - v1) * dy;
    out[b] = static_cast<std::uint8_t>(v1);
  }
  return true;
}

// Pillow's cubic convolution (a = -1) of four values at d.
double cubic(double v1, double v2, double v3, double v4, double d) {
  const double p1 = v2, p2 = -v1 + v3, p3 = 2 * (v1 - v2) + v3 - v4, p4 = -v1 + v2 - v3 + v4;
  return p1 + d * (p2 + d * (p3 + d * p4));
}

// Pillow's bicubic_filter32RGB at (xin, yin); false outside the image. The
// first row is clamped, the three below repeat the one above where they
// fall outside.
bool bicubic_pixel(const std::uint8_t* in, int w, int h, double xin, double yin, std::uint8_t* out) {
  if (xin < 0.0 || xin >= w || yin < 0.0 || yin >= h) return false;
  xin -= 0.5;
  yin -= 0.5;
  int x = floor_int(xin), y = floor_int(yin);
  const double dx = xin - x, dy = yin - y;
  --x;
  --y;
  int xs[4];
  for (int k = 0; k < 4; ++k) xs[k] = std::clamp(x + k, 0, w - 1);
  for (int b = 0; b < 3; ++b) {
    const auto row = [&](int py) {
      const std::uint8_t* r = in + static_cast<std::size_t>(py) * w * 3 + b;
      return cubic(r[xs[0] * 3], r[xs[1] * 3], r[xs[2] * 3], r[xs[3] * 3], dx);
    };
    double v[4];
    v[0] = row(std::clamp(y, 0, h - 1));
    for (int k = 1; k < 4; ++k) v[k] = (y + k >= 0 && y + k < h) ? row(y + k) : v[k - 1];
    const double value = cubic(v[0], v[1], v[2], v[3], dy);
    out[b] = value <= 0 ? 0 : value >= 255 ? 255 : static_cast<std::uint8_t>(value);
  }
  return true;
}

// ImagingGenericTransform: each output pixel's centre mapped by the
// matrix and sampled by the filter (Pillow's bilinear or bicubic), left
// the fill colour where the filter finds it outside the image.
template <class Filter>
void affine_filtered(const std::uint8_t* in, RgbImage out, const Matrix& a, Filter filter) {
  const int w = out.width, h = out.height;
  for (int y = 0; y < h; ++y) {
    std::uint8_t* row = out.pixels + static_cast<std::size_t>(y) * w * 3;
    const double yc = y + 0.5;
    for (int x = 0; x < w; ++x) {
      const double xc = x + 0.5;
      (void)filter(in, w, h, a[0] * xc + a[1] * yc + a[2], a[3] * xc + a[4] * yc + a[5],
                   row + static_cast<std::size_t>(x) * 3);
    }
  }
}

// A whole-pixel shift (torchvision's translations): every filter then
// takes each covered pixel from one source pixel (dx = dy = 0 for the
// bilinear and bicubic ones), and the same pixels fall inside the image.
bool integer_shift(const Matrix& a) {
  return a[0] == 1 && a[1] == 0 && a[3] == 0 && a[4] == 1 && a[2] == std::trunc(a[2]) && a[5] == std::trunc(a[5]) &&
         std::fabs(a[2]) < 1e9 && std::fabs(a[5]) < 1e9;
}

void shift_rows(const std::uint8_t* in, RgbImage out, int sx, int sy) {
  const int w = out.width, h = out.height;
  const int first = std::max(0, -sx), last = std::min(w, w - sx);  // output columns with a source
  if (first >= last) return;
  for (int y = 0; y < h; ++y) {
    const int yin = y + sy;
    if (yin < 0 || yin >= h) continue;
    std::memcpy(out.pixels + (static_cast<std::size_t>(y) * w + first) * 3,
                in + (static_cast<std::size_t>(yin) * w + first + sx) * 3, static_cast<std::size_t>(last - first) * 3);
  }
}

// Image.transform(size, AFFINE, m, resample, fillcolor): the output starts
// as the fill colour; Pillow picks its path from the filter and matrix.
void transform_affine(RgbImage image, const Matrix& a, const GeometricOptions& options,
                      std::vector<std::uint8_t>& scratch) {
  scratch.assign(image.pixels, image.pixels + byte_count(image));
  fill_all(image, options.fill);
  if (integer_shift(a)) {
    shift_rows(scratch.data(), image, static_cast<int>(a[2]), static_cast<int>(a[5]));
  } else if (options.interpolation == PolicyInterpolation::kBilinear) {
    affine_filtered(scratch.data(), image, a, bilinear_pixel);
  } else if (options.interpolation == PolicyInterpolation::kBicubic) {
    affine_filtered(scratch.data(), image, a, bicubic_pixel);
  } else if (a[1] == 0 && a[3] == 0) {
    scale_affine(scratch.data(), image, a);
  } else {
    const double w = image.width, h = image.height;
    if (fits_fixed_point(a, 0, 0) && fits_fixed_point(a, w, h) && fits_fixed_point(a, 0, h) &&
        fits_fixed_point(a, w, 0)) {
      affine_fixed(scratch.data(), image, a);
    } else {
      affine_nearest_double(scratch.data(), image, a);
    }
  }
}

// Pillow's transpose shortcuts of rotate(): 180, and 90 or 270 when square.
void rotate_180(RgbImage image, std::vector<std::uint8_t>& scratch) {
  scratch.assign(image.pixels, image.pixels + byte_count(image));
  const int w = image.width, h = image.height;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      copy_pixel(scratch.data(), w, w - 1 - x, h - 1 - y, image.pixels + (static_cast<std::size_t>(y) * w + x) * 3);
    }
  }
}

void rotate_quarter_square(RgbImage image, bool counter_clockwise, std::vector<std::uint8_t>& scratch) {
  scratch.assign(image.pixels, image.pixels + byte_count(image));
  const int n = image.width;
  for (int y = 0; y < n; ++y) {
    for (int x = 0; x < n; ++x) {
      std::uint8_t* out = image.pixels + (static_cast<std::size_t>(y) * n + x) * 3;
      if (counter_clockwise) {
        copy_pixel(scratch.data(), n, n - 1 - y, x, out);
      } else {
        copy_pixel(scratch.data(), n, y, n - 1 - x, out);
      }
    }
  }
}

double shear_degrees(double magnitude) { return std::atan(magnitude) * kRadiansToDegrees; }

}  // namespace

std::optional<PolicyInterpolation> parse_policy_interpolation(std::string_view name) noexcept {
  if (name == "nearest") return PolicyInterpolation::kNearest;
  if (name == "bilinear") return PolicyInterpolation::kBilinear;
  if (name == "bicubic") return PolicyInterpolation::kBicubic;
  return std::nullopt;
}

void shear_x(RgbImage image, double magnitude, const GeometricOptions& options, std::vector<std::uint8_t>& scratch) {
  transform_affine(image, inverse_affine(0, 0, 0.0, 0, 0, shear_degrees(magnitude), 0.0), options, scratch);
}

void shear_y(RgbImage image, double magnitude, const GeometricOptions& options, std::vector<std::uint8_t>& scratch) {
  transform_affine(image, inverse_affine(0, 0, 0.0, 0, 0, 0.0, shear_degrees(magnitude)), options, scratch);
}

void translate_x(RgbImage image, double pixels, const GeometricOptions& options, std::vector<std::uint8_t>& scratch) {
  const double shift = std::trunc(pixels);
  transform_affine(image, inverse_affine(image.width * 0.5, image.height * 0.5, 0.0, shift, 0, 0.0, 0.0), options,
                   scratch);
}

void translate_y(RgbImage image, double pixels, const GeometricOptions& options, std::vector<std::uint8_t>& scratch) {
  const double shift = std::trunc(pixels);
  transform_affine(image, inverse_affine(image.width * 0.5, image.height * 0.5, 0.0, 0, shift, 0.0, 0.0), options,
                   scratch);
}

void rotate(RgbImage image, double degrees, const GeometricOptions& options, std::vector<std::uint8_t>& scratch) {
  const double angle = modulo_360(degrees);
  if (angle == 0.0) return;
  if (angle == 180.0) return rotate_180(image, scratch);
  if ((angle == 90.0 || angle == 270.0) && image.width == image.height) {
    return rotate_quarter_square(image, angle == 90.0, scratch);
  }
  const double t = -(angle * kDegreesToRadians);
  Matrix m{round15(std::cos(t)), round15(std::sin(t)), 0.0, round15(-std::sin(t)), round15(std::cos(t)), 0.0};
  const double cx = image.width / 2.0, cy = image.height / 2.0;
  const double px = -cx - 0, py = -cy - 0;
  const double m2 = m[0] * px + m[1] * py + m[2];
  const double m5 = m[3] * px + m[4] * py + m[5];
  m[2] = m2 + cx;
  m[5] = m5 + cy;
  transform_affine(image, m, options, scratch);
}

void pil_affine(RgbImage image, const std::array<double, 6>& matrix, const GeometricOptions& options,
                std::vector<std::uint8_t>& scratch) {
  if (image.width <= 0 || image.height <= 0) return;
  transform_affine(image, matrix, options, scratch);
}

}  // namespace tensorcom::imaging
