// timm's RandAugment from its config strings ("rand-m9-mstd0.5-inc1"), as
// timm/data/auto_augment.py builds and applies it for the "ResNet strikes
// back" recipes: num_layers operations an image chosen with replacement
// from timm's list (the "increasing" one with inc1), each applied with
// probability p, its magnitude drawn from N(m, mstd) (uniform in [0, m]
// for mstd > 100) and clipped to [0, mmax or 10], its sign random, the
// geometric ones filled with timm's ImageNet mean (124, 116, 104) and
// resampled bilinear or bicubic (each call choosing one at random, timm's
// "random" training interpolation, unless one is fixed). The operations
// drawn are recorded with the argument timm's op function receives.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tensorcom/imaging/auto_augment.h"

namespace tensorcom::imaging {

// Parses timm's config string. Throws ArgumentError naming the section for
// what timm refuses (not "rand-...", an unknown key, a value that is not a
// number) and for what is not supported here (weighted choices: "w", "t").
[[nodiscard]] TimmRandAugmentOptions parse_timm_rand_augment(std::string_view config);

// The draws of one image, appended to `out`; `random_interpolation`: each
// geometric call picks bilinear or bicubic (else `fixed` applies).
void draw_timm_rand_augment(const TimmRandAugmentOptions& options, int width, int height, bool random_interpolation,
                            PolicyInterpolation fixed, std::mt19937_64& rng, std::vector<AppliedOp>& out);

}  // namespace tensorcom::imaging
