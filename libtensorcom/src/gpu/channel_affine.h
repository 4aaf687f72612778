// Internal: the per-channel affine map an image conversion applies. Plain
// C++ so that both nvcc and the no-CUDA build can read it.
#pragma once

#include <cstddef>

namespace tensorcom::detail {

inline constexpr std::size_t kMaxChannels = 4;

// Per channel y = x * scale + bias: the conversion's (x / 255 - mean) / std.
struct ChannelAffine {
  float scale[kMaxChannels] = {};
  float bias[kMaxChannels] = {};
};

}  // namespace tensorcom::detail
