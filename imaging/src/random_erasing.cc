#include "tensorcom/imaging/random_erasing.h"

#include <cmath>
#include <string>

#include "tensorcom/codec/error.h"
#include "tensorcom/imaging/sample_rng.h"

namespace tensorcom::imaging {

namespace {

// Python's round(): halves to even.
int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

}  // namespace

void check_random_erasing(const RandomErasingOptions& o) {
  if (!(o.probability >= 0 && o.probability <= 1)) {
    throw ArgumentError("RandomErasing: p must be a probability from 0 to 1, not " + std::to_string(o.probability));
  }
  if (!(o.scale.first >= 0 && o.scale.first <= o.scale.second && o.scale.second <= 1)) {
    throw ArgumentError("RandomErasing: scale must be 0 <= low <= high <= 1");
  }
  if (!(o.ratio.first > 0 && o.ratio.first <= o.ratio.second && std::isfinite(o.ratio.second))) {
    throw ArgumentError("RandomErasing: ratio must be 0 < low <= high, finite");
  }
}

std::optional<std::array<std::int32_t, 4>> draw_erase_box(int width, int height, const RandomErasingOptions& o,
                                                          std::mt19937_64& rng) {
  if (o.probability <= 0 || std::uniform_real_distribution<double>(0.0, 1.0)(rng) >= o.probability) {
    return std::nullopt;
  }
  const double area = static_cast<double>(width) * height;
  const float log_low = std::log(static_cast<float>(o.ratio.first));
  const float log_high = std::log(static_cast<float>(o.ratio.second));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * uniform_float32(rng, o.scale.first, o.scale.second);
    const double aspect = static_cast<float>(std::exp(static_cast<float>(uniform_float32(rng, log_low, log_high))));
    const int h = round_half_even(std::sqrt(erase_area * aspect));
    const int w = round_half_even(std::sqrt(erase_area / aspect));
    if (!(h < height && w < width)) continue;
    const int top = std::uniform_int_distribution<int>(0, height - h)(rng);
    const int left = std::uniform_int_distribution<int>(0, width - w)(rng);
    return std::array<std::int32_t, 4>{top, left, h, w};
  }
  return std::nullopt;
}

}  // namespace tensorcom::imaging
