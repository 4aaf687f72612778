// torchvision's ColorJitter and RandomGrayscale (v1, on PIL images): the
// four adjustments in a random order, each factor uniform in its range
// (a float32, as torch draws it), then greyscale with a probability. The
// operations drawn carry torchvision's functional names and arguments
// ("adjust_brightness", factor; "rgb_to_grayscale", 3), so that
// getattr(torchvision.transforms.functional, name)(img, argument) re-makes
// each step.
#pragma once

#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "tensorcom/imaging/auto_augment.h"

namespace tensorcom::imaging {

// [low, high] of each factor; unset: that adjustment is off.
struct ColorJitterOptions {
  std::optional<std::pair<double, double>> brightness, contrast, saturation, hue;
};

// torchvision's ranges from single numbers: brightness b gives
// [max(0, 1 - b), 1 + b] (contrast and saturation alike), hue h [-h, h];
// 0 turns that one off. Throws ArgumentError naming the argument for a
// negative number or a hue over 0.5.
[[nodiscard]] ColorJitterOptions color_jitter_from(double brightness, double contrast, double saturation, double hue);

// Appends the draws to `out`: the adjustments in torch.randperm(4)'s place
// of a random order (the ones off skipped), then greyscale with
// `grayscale_probability`.
void draw_color_jitter(const ColorJitterOptions& options, double grayscale_probability, std::mt19937_64& rng,
                       std::vector<AppliedOp>& out);

}  // namespace tensorcom::imaging
