#include "batch_format.h"

#include <bit>
#include <cstring>

namespace tensorcom::pipeline {

DType BatchFormat::dtype() const noexcept {
  switch (pixels) {
    case PixelType::kFloat16: return DType::kFloat16;
    case PixelType::kFloat32: return DType::kFloat32;
    case PixelType::kUInt8: break;
  }
  return DType::kUInt8;
}

std::size_t BatchFormat::image_bytes() const noexcept {
  return static_cast<std::size_t>(size) * static_cast<std::size_t>(size) * 3 * itemsize(dtype());
}

Shape BatchFormat::image_shape(std::int64_t n) const {
  if (layout == ImageLayout::kBCHW) return {n, 3, size, size};
  return {n, size, size, 3};
}

std::uint16_t float_to_half(float value) noexcept {
  auto bits = std::bit_cast<std::uint32_t>(value);
  std::uint32_t sign = (bits >> 16) & 0x8000u;
  std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0));
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflows to infinity
  if (magnitude < 0x38800000u) {
    // Subnormal half: shift the mantissa (with its implicit 1) into place, rounding to nearest even.
    if (magnitude < 0x33000000u) return static_cast<std::uint16_t>(sign);
    std::uint32_t exponent = magnitude >> 23;
    std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    std::uint32_t shift = 126 - exponent;
    std::uint32_t half = mantissa >> shift;
    std::uint32_t rest = mantissa & ((1u << shift) - 1);
    std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t rounded = magnitude - 0x38000000u;  // rebias exponent 127 -> 15
  rounded += 0xfffu + ((rounded >> 13) & 1u);       // round to nearest even
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

namespace {

template <class Out, class Store>
void convert_float(const BatchFormat& f, const std::uint8_t* hwc, Out* dst, Store store) {
  const std::size_t pixels = static_cast<std::size_t>(f.size) * static_cast<std::size_t>(f.size);
  float scale[3], offset[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * f.std[c]);
    offset[c] = -f.mean[c] / f.std[c];
  }
  for (std::size_t p = 0; p < pixels; ++p) {
    for (int c = 0; c < 3; ++c) {
      float v = static_cast<float>(hwc[p * 3 + c]) * scale[c] + offset[c];
      std::size_t at = f.layout == ImageLayout::kBHWC ? p * 3 + c : c * pixels + p;
      dst[at] = store(v);
    }
  }
}

}  // namespace

void convert_image(const BatchFormat& f, const std::uint8_t* hwc, std::byte* dst) {
  const std::size_t pixels = static_cast<std::size_t>(f.size) * static_cast<std::size_t>(f.size);
  switch (f.pixels) {
    case PixelType::kUInt8:
      if (f.layout == ImageLayout::kBHWC) {
        std::memcpy(dst, hwc, pixels * 3);
      } else {
        auto* out = reinterpret_cast<std::uint8_t*>(dst);
        for (std::size_t p = 0; p < pixels; ++p) {
          for (int c = 0; c < 3; ++c) out[c * pixels + p] = hwc[p * 3 + c];
        }
      }
      return;
    case PixelType::kFloat32:
      convert_float(f, hwc, reinterpret_cast<float*>(dst), [](float v) { return v; });
      return;
    case PixelType::kFloat16:
      convert_float(f, hwc, reinterpret_cast<std::uint16_t*>(dst), [](float v) { return float_to_half(v); });
      return;
  }
}

}  // namespace tensorcom::pipeline
