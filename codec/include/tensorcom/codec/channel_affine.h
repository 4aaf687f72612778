// The per-channel affine map that normalises uint8 pixels, as plain data.
// Plain C++17 on purpose: nvcc compiles the GPU conversion kernel, which
// takes this struct by value, as C++17 (see batch_layout.h for the rest).
#pragma once

#include <cstddef>

namespace tensorcom {

// Images have 1 (grey), 2, 3 (RGB) or 4 (RGBA) channels.
inline constexpr std::size_t kMaxChannels = 4;

// Per channel c: y = x * scale[c] + bias[c]. Channels past the image's are 0.
struct ChannelAffine {
  float scale[kMaxChannels] = {};
  float bias[kMaxChannels] = {};
};

}  // namespace tensorcom
