// torchvision's RandomErasing: with probability p, a box of a random area
// fraction (scale) and aspect ratio (ratio, drawn on a log scale), ten
// attempts to fit it, at a random place. torchvision applies it to the
// normalised tensor (erased values exactly 0, or N(0, 1) noise), which a
// uint8 image cannot hold: the augmenter only draws the box and records it
// (SampleGeometry::erase); the servers write the values into float output,
// and for uint8 output the box travels in the metadata for the trainer to
// apply after normalising (docs/tools.md).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <utility>

namespace tensorcom::imaging {

struct RandomErasingOptions {
  double probability = 0.5;
  std::pair<double, double> scale{0.02, 0.33};
  std::pair<double, double> ratio{0.3, 3.3};
  bool random_values = false;  // N(0, 1) noise instead of 0 ("random")
};

// Throws ArgumentError naming what torchvision would refuse.
void check_random_erasing(const RandomErasingOptions& options);

// [top, left, height, width] in the image's pixels, or nothing (not drawn,
// or no attempt fitted).
[[nodiscard]] std::optional<std::array<std::int32_t, 4>> draw_erase_box(int width, int height,
                                                                        const RandomErasingOptions& options,
                                                                        std::mt19937_64& rng);

}  // namespace tensorcom::imaging
