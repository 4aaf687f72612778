#include "tensorcom/imaging/color_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <vector>

namespace tensorcom::imaging {

namespace {

using Lut = std::array<std::uint8_t, 256>;
using Histogram = std::array<std::uint64_t, 256>;

std::size_t value_count(RgbImage image) {
  return static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height) * 3;
}

void apply_lut(RgbImage image, const Lut& lut) {
  std::uint8_t* p = image.pixels;
  for (std::size_t i = 0, n = value_count(image); i < n; ++i) p[i] = lut[p[i]];
}

void apply_luts(RgbImage image, const std::array<Lut, 3>& luts) {
  std::uint8_t* p = image.pixels;
  for (std::size_t i = 0, n = value_count(image); i < n; i += 3) {
    p[i] = luts[0][p[i]];
    p[i + 1] = luts[1][p[i + 1]];
    p[i + 2] = luts[2][p[i + 2]];
  }
}

std::array<Histogram, 3> channel_histograms(RgbImage image) {
  std::array<Histogram, 3> h{};
  const std::uint8_t* p = image.pixels;
  for (std::size_t i = 0, n = value_count(image); i < n; i += 3) {
    ++h[0][p[i]];
    ++h[1][p[i + 1]];
    ++h[2][p[i + 2]];
  }
  return h;
}

Lut identity_lut() {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(i);
  return lut;
}

// Pillow's RGB to L: 299/587/114 scaled by 2^16, rounded.
std::uint8_t luma(const std::uint8_t* rgb) {
  return static_cast<std::uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

// ImagingBlend(degenerate, image, alpha) for one value: single precision,
// truncated; clipped only when alpha extrapolates.
struct Blend {
  explicit Blend(double factor) : alpha(static_cast<float>(factor)), interpolates(alpha >= 0 && alpha <= 1.0) {}

  std::uint8_t operator()(int degenerate, int value) const {
    const float mixed = static_cast<float>(degenerate) + alpha * static_cast<float>(value - degenerate);
    if (interpolates) return static_cast<std::uint8_t>(mixed);
    if (!(mixed > 0.0f)) return 0;  // NaN too (an infinite factor times 0): 0 where Pillow's cast is undefined
    if (mixed >= 255.0f) return 255;
    return static_cast<std::uint8_t>(mixed);
  }

  float alpha;
  bool interpolates;
};

// Lookup tables make the blends with a constant degenerate value cheap.
Lut blend_lut(int degenerate, double factor) {
  const Blend blend(factor);
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = blend(degenerate, v);
  return lut;
}

// ImageOps.equalize's table for one channel.
Lut equalize_lut(const Histogram& h) {
  std::uint64_t total = 0, last = 0;
  int used = 0;
  for (std::uint64_t count : h) {
    if (count == 0) continue;
    total += count;
    last = count;
    ++used;
  }
  if (used <= 1) return identity_lut();
  const std::uint64_t step = (total - last) / 255;
  if (step == 0) return identity_lut();
  Lut lut;
  std::uint64_t n = step / 2;
  for (int i = 0; i < 256; ++i) {
    const std::uint64_t v = n / step;
    lut[i] = static_cast<std::uint8_t>(v > 255 ? 255 : v);
    n += h[i];
  }
  return lut;
}

// ImageOps.autocontrast's table for one channel (no cutoff).
Lut autocontrast_lut(const Histogram& h) {
  int lo = 0, hi = 255;
  while (lo < 256 && h[lo] == 0) ++lo;
  while (hi >= 0 && h[hi] == 0) --hi;
  if (hi <= lo) return identity_lut();
  const double scale = 255.0 / (hi - lo);
  const double offset = -lo * scale;
  Lut lut;
  for (int i = 0; i < 256; ++i) {
    const int v = static_cast<int>(i * scale + offset);  // Python's int(): towards zero
    lut[i] = static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
  }
  return lut;
}

// Pillow's SMOOTH filter (3x3, 1 1 1 / 1 5 1 / 1 1 1, divided by 13) as
// ImagingFilter3x3 computes it: the kernel divided in single precision,
// each sum started at 0.5 and truncated, rows summed bottom to top.
void smooth(const std::uint8_t* in, std::uint8_t* out, int width, int height) {
  const float side = 1.0f / 13.0f, centre = 5.0f / 13.0f;
  const std::size_t row = static_cast<std::size_t>(width) * 3;
  for (int y = 0; y < height; ++y) {
    const std::uint8_t* r0 = in + static_cast<std::size_t>(y) * row;
    std::uint8_t* o = out + static_cast<std::size_t>(y) * row;
    if (y == 0 || y == height - 1 || width < 3) {
      std::copy(r0, r0 + row, o);
      continue;
    }
    const std::uint8_t* above = r0 - row;
    const std::uint8_t* below = r0 + row;
    std::copy(r0, r0 + 3, o);
    for (std::size_t i = 3; i + 3 < row; ++i) {
      float ss = 0.5f;
      ss += static_cast<float>(below[i - 3]) * side + static_cast<float>(below[i]) * side +
            static_cast<float>(below[i + 3]) * side;
      ss += static_cast<float>(r0[i - 3]) * side + static_cast<float>(r0[i]) * centre +
            static_cast<float>(r0[i + 3]) * side;
      ss += static_cast<float>(above[i - 3]) * side + static_cast<float>(above[i]) * side +
            static_cast<float>(above[i + 3]) * side;
      o[i] = ss <= 0.0f ? 0 : ss >= 255.0f ? 255 : static_cast<std::uint8_t>(ss);
    }
    std::copy(r0 + row - 3, r0 + row, o + row - 3);
  }
}

struct Hsv {
  std::uint8_t h, s, v;
};

// Pillow's RGB to HSV (Convert.c, after colorsys), its float and double
// steps as Pillow takes them.
Hsv rgb_to_hsv(const std::uint8_t* rgb) {
  const std::uint8_t r = rgb[0], g = rgb[1], b = rgb[2];
  const std::uint8_t maxc = std::max(r, std::max(g, b)), minc = std::min(r, std::min(g, b));
  if (minc == maxc) return {0, 0, maxc};
  const float cr = static_cast<float>(maxc - minc);
  const float s = cr / static_cast<float>(maxc);
  const float rc = static_cast<float>(maxc - r) / cr;
  const float gc = static_cast<float>(maxc - g) / cr;
  const float bc = static_cast<float>(maxc - b) / cr;
  float h;
  if (r == maxc) {
    h = bc - gc;
  } else if (g == maxc) {
    h = static_cast<float>(2.0 + rc - bc);
  } else {
    h = static_cast<float>(4.0 + gc - rc);
  }
  h = static_cast<float>(std::fmod(h / 6.0 + 1.0, 1.0));
  const auto clip8 = [](int v) { return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); };
  return {clip8(static_cast<int>(h * 255.0)), clip8(static_cast<int>(s * 255.0)), maxc};
}

// Pillow's HSV to RGB.
void hsv_to_rgb(Hsv hsv, std::uint8_t* rgb) {
  const std::uint8_t v = hsv.v;
  if (hsv.s == 0) {
    rgb[0] = rgb[1] = rgb[2] = v;
    return;
  }
  const int i = static_cast<int>(std::floor(static_cast<float>(hsv.h) * 6.0 / 255.0));
  const float f = static_cast<float>(static_cast<float>(hsv.h) * 6.0 / 255.0 - static_cast<float>(i));
  const float fs = static_cast<float>(static_cast<float>(hsv.s) / 255.0);
  const auto clip8 = [](double x) {
    const int n = static_cast<int>(std::round(x));
    return static_cast<std::uint8_t>(n < 0 ? 0 : n > 255 ? 255 : n);
  };
  const std::uint8_t p = clip8(static_cast<float>(v) * (1.0 - fs));
  const std::uint8_t q = clip8(static_cast<float>(v) * (1.0 - fs * f));
  const std::uint8_t t = clip8(static_cast<float>(v) * (1.0 - fs * (1.0 - f)));
  const std::uint8_t table[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  const std::uint8_t* out = table[i % 6];
  rgb[0] = out[0];
  rgb[1] = out[1];
  rgb[2] = out[2];
}

}  // namespace

void adjust_hue(RgbImage image, double hue_factor) {
  // torchvision adds np.uint8(hue_factor * 255) to the hue plane, wrapping;
  // it refuses factors outside [-0.5, 0.5], which are kept to that here.
  const double factor = std::isnan(hue_factor) ? 0.0 : std::clamp(hue_factor, -0.5, 0.5);
  const auto shift = static_cast<std::uint8_t>(static_cast<int>(factor * 255) & 0xff);
  std::uint8_t* p = image.pixels;
  for (std::size_t i = 0, n = value_count(image); i < n; i += 3) {
    Hsv hsv = rgb_to_hsv(p + i);
    hsv.h = static_cast<std::uint8_t>(hsv.h + shift);
    hsv_to_rgb(hsv, p + i);
  }
}

void invert(RgbImage image) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(255 - i);
  apply_lut(image, lut);
}

void posterize(RgbImage image, int bits) {
  const int mask = ~((1 << (8 - bits)) - 1);
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(i & mask);
  apply_lut(image, lut);
}

void solarize(RgbImage image, double threshold) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(i < threshold ? i : 255 - i);
  apply_lut(image, lut);
}

void solarize_add(RgbImage image, int add, int threshold) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(i < threshold ? std::min(255, i + add) : i);
  apply_lut(image, lut);
}

void autocontrast(RgbImage image) {
  const auto h = channel_histograms(image);
  apply_luts(image, {autocontrast_lut(h[0]), autocontrast_lut(h[1]), autocontrast_lut(h[2])});
}

void equalize(RgbImage image) {
  const auto h = channel_histograms(image);
  apply_luts(image, {equalize_lut(h[0]), equalize_lut(h[1]), equalize_lut(h[2])});
}

void adjust_brightness(RgbImage image, double factor) { apply_lut(image, blend_lut(0, factor)); }

void adjust_saturation(RgbImage image, double factor) {
  const Blend blend(factor);
  std::uint8_t* p = image.pixels;
  for (std::size_t i = 0, n = value_count(image); i < n; i += 3) {
    const int grey = luma(p + i);
    p[i] = blend(grey, p[i]);
    p[i + 1] = blend(grey, p[i + 1]);
    p[i + 2] = blend(grey, p[i + 2]);
  }
}

void adjust_contrast(RgbImage image, double factor) {
  std::uint64_t sum = 0;
  const std::size_t n = value_count(image);
  for (std::size_t i = 0; i < n; i += 3) sum += luma(image.pixels + i);
  const std::size_t pixels = n / 3;
  // ImageStat's mean in double precision, then int(mean + 0.5).
  const int mean = pixels == 0 ? 0 : static_cast<int>(static_cast<double>(sum) / static_cast<double>(pixels) + 0.5);
  apply_lut(image, blend_lut(mean, factor));
}

void adjust_sharpness(RgbImage image, double factor) {
  const std::size_t n = value_count(image);
  thread_local std::vector<std::uint8_t> smoothed;  // kept: a worker sharpens image after image
  smoothed.resize(n);
  smooth(image.pixels, smoothed.data(), image.width, image.height);
  const Blend blend(factor);
  for (std::size_t i = 0; i < n; ++i) image.pixels[i] = blend(smoothed[i], image.pixels[i]);
}

void to_grayscale(RgbImage image) {
  std::uint8_t* p = image.pixels;
  for (std::size_t i = 0, n = value_count(image); i < n; i += 3) {
    const std::uint8_t grey = luma(p + i);
    p[i] = p[i + 1] = p[i + 2] = grey;
  }
}

}  // namespace tensorcom::imaging
