// Photo-like synthetic JPEGs for demos and tests: varied sizes and aspect
// ratios, smooth colour fields, texture, shapes and grain, so that decoding,
// resizing and cropping cost what they cost on real photographs.
#pragma once

#include <cstdint>

#include "tensorcom/formats/file_io.h"

namespace make_shards {

struct SyntheticImageOptions {
  std::int64_t classes = 10;  // labels are in [0, classes); the class sets the base hue
  int min_side = 160;         // smallest width or height, in pixels
  int max_side = 480;         // largest width or height, in pixels
  int quality = 90;           // JPEG quality, 1..100
  std::uint64_t seed = 0;     // with the index, decides everything about an image
};

// Returns the baseline JPEG of synthetic image index, of class label. The
// result depends only on (index, label, options), not on the order or
// thread of the calls. Throws tensorcom::Error if encoding fails.
// REQUIRES: 0 < min_side <= max_side, 1 <= quality <= 100.
// Thread-safe.
[[nodiscard]] tensorcom::formats::ByteBuffer synthetic_jpeg(std::uint64_t index, std::int64_t label,
                                                            const SyntheticImageOptions& options);

}  // namespace make_shards
