// Internal to GPU feeding: what the CUDA and the no-CUDA implementations share.
#pragma once

#include <cstdint>

#include "tensorcom/gpu/gpu_feeder.h"

namespace tensorcom::detail {

// Throws ArgumentError unless the conversion's dtype, layout, mean and std are usable.
void check_conversion(const ImageConversion& conversion);
// The conversion's per-channel affine map for `channels` channels; throws
// ArgumentError as check_conversion, or as tensorcom::channel_affine.
[[nodiscard]] ChannelAffine channel_affine(const ImageConversion& conversion, std::int64_t channels);

inline constexpr char kNoCudaMessage[] = "GPU feeding is not available: tensorcom was built without CUDA";

}  // namespace tensorcom::detail
