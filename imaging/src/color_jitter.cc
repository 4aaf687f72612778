#include "tensorcom/imaging/color_jitter.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "tensorcom/codec/error.h"
#include "tensorcom/imaging/sample_rng.h"

namespace tensorcom::imaging {

namespace {

std::optional<std::pair<double, double>> around(double value, double centre, const char* name, bool clip_at_zero) {
  if (!(value >= 0) || !std::isfinite(value)) {
    throw ArgumentError(std::string("ColorJitter ") + name + " must be a finite number of at least 0, not " +
                        std::to_string(value));
  }
  if (value == 0) return std::nullopt;
  const double low = clip_at_zero ? std::max(0.0, centre - value) : centre - value;
  return std::pair{low, centre + value};
}

}  // namespace

ColorJitterOptions color_jitter_from(double brightness, double contrast, double saturation, double hue) {
  if (hue > 0.5) throw ArgumentError("ColorJitter hue must be at most 0.5, not " + std::to_string(hue));
  return {around(brightness, 1, "brightness", true), around(contrast, 1, "contrast", true),
          around(saturation, 1, "saturation", true), around(hue, 0, "hue", false)};
}

void draw_color_jitter(const ColorJitterOptions& options, double grayscale_probability, std::mt19937_64& rng,
                       std::vector<AppliedOp>& out) {
  const bool jitter = options.brightness || options.contrast || options.saturation || options.hue;
  if (jitter) {
    std::array<int, 4> order{0, 1, 2, 3};
    std::shuffle(order.begin(), order.end(), rng);
    // Every factor is drawn, in torchvision's order, whatever the order applied.
    const std::array<const std::optional<std::pair<double, double>>*, 4> ranges{&options.brightness, &options.contrast,
                                                                                &options.saturation, &options.hue};
    std::array<double, 4> factors{};
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      if (*ranges[i]) factors[i] = uniform_float32(rng, (*ranges[i])->first, (*ranges[i])->second);
    }
    constexpr std::array<AugmentOp, 4> kOps{AugmentOp::kAdjustBrightness, AugmentOp::kAdjustContrast,
                                            AugmentOp::kAdjustSaturation, AugmentOp::kAdjustHue};
    for (int i : order) {
      if (*ranges[static_cast<std::size_t>(i)])
        out.push_back({kOps[static_cast<std::size_t>(i)], factors[static_cast<std::size_t>(i)]});
    }
  }
  if (grayscale_probability > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng) < grayscale_probability) {
    out.push_back({AugmentOp::kRgbToGrayscale, 3});
  }
}

}  // namespace tensorcom::imaging
