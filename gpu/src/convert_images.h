// Internal: the launcher of the image conversion kernel (convert_images.cu).
// Plain types only, so that nvcc need not see the C++20 headers: the affine
// map comes from the codec's C++17 header channel_affine.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tensorcom/codec/channel_affine.h"

namespace tensorcom::detail {

enum class ConvertedType { kFloat16, kBFloat16, kFloat32 };

struct ImageGeometry {
  std::int64_t batch = 0, height = 0, width = 0, channels = 0;
};

// Queues on `stream` (on the current device) the conversion of uint8
// (B, H, W, C) pixels at `in` to `out`: (B, C, H, W) when planar, else
// (B, H, W, C); out[c] = in[c] * affine.scale[c] + affine.bias[c].
// Returns cudaGetLastError() after the launch.
cudaError_t launch_convert_images(const std::uint8_t* in, void* out, ImageGeometry geometry, ConvertedType type,
                                  bool planar, const ChannelAffine& affine, cudaStream_t stream);

}  // namespace tensorcom::detail
