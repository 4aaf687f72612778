// The image conversion kernel: uint8 BHWC pixels to float16, bfloat16 or
// float32, planar (NCHW) or channels-last (NHWC), normalised with mean/std,
// in one pass. One thread a pixel: it reads the pixel's C bytes and writes C
// values, so reads and (for NHWC) writes are contiguous across a warp, and
// for NCHW each of the C planes is written contiguously.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "convert_images.h"

namespace tensorcom::detail {

namespace {

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <class T, int C, bool Planar>
__global__ void convert_kernel(const std::uint8_t* __restrict__ in, T* __restrict__ out, std::int64_t pixels,
                               std::int64_t plane, ChannelAffine affine) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pixels; p += stride) {
    const std::uint8_t* src = in + p * C;
    if constexpr (Planar) {
      // p = b * plane + i: image b, pixel i of its H*W plane.
      const std::int64_t b = p / plane, i = p - b * plane;
      T* dst = out + b * plane * C + i;
#pragma unroll
      for (int c = 0; c < C; ++c) dst[c * plane] = from_float<T>(fmaf(src[c], affine.scale[c], affine.bias[c]));
    } else {
      T* dst = out + p * C;
#pragma unroll
      for (int c = 0; c < C; ++c) dst[c] = from_float<T>(fmaf(src[c], affine.scale[c], affine.bias[c]));
    }
  }
}

template <class T, int C>
cudaError_t launch_typed(const std::uint8_t* in, void* out, const ImageGeometry& g, bool planar,
                         const ChannelAffine& affine, cudaStream_t stream) {
  const std::int64_t plane = g.height * g.width, pixels = g.batch * plane;
  if (pixels == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  // Enough blocks to fill any current GPU; the grid-stride loop does the rest.
  const std::int64_t blocks = std::min<std::int64_t>((pixels + kThreads - 1) / kThreads, 65535);
  if (planar) {
    convert_kernel<T, C, true>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(in, static_cast<T*>(out), pixels, plane, affine);
  } else {
    convert_kernel<T, C, false>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(in, static_cast<T*>(out), pixels, plane, affine);
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_channels(const std::uint8_t* in, void* out, const ImageGeometry& g, bool planar,
                            const ChannelAffine& affine, cudaStream_t stream) {
  switch (g.channels) {
    case 1: return launch_typed<T, 1>(in, out, g, planar, affine, stream);
    case 2: return launch_typed<T, 2>(in, out, g, planar, affine, stream);
    case 3: return launch_typed<T, 3>(in, out, g, planar, affine, stream);
    case 4: return launch_typed<T, 4>(in, out, g, planar, affine, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_convert_images(const std::uint8_t* in, void* out, ImageGeometry geometry, ConvertedType type,
                                  bool planar, const ChannelAffine& affine, cudaStream_t stream) {
  switch (type) {
    case ConvertedType::kFloat16: return launch_channels<__half>(in, out, geometry, planar, affine, stream);
    case ConvertedType::kBFloat16: return launch_channels<__nv_bfloat16>(in, out, geometry, planar, affine, stream);
    case ConvertedType::kFloat32: return launch_channels<float>(in, out, geometry, planar, affine, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tensorcom::detail
