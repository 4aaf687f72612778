#include "batch_format.h"

#include <cstring>
#include <random>

#include "tensorcom/codec/half.h"

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

namespace {

template <class Out, class Store>
void convert_float(const BatchFormat& f, const std::uint8_t* hwc, Out* dst, Store store) {
  const std::size_t pixels = static_cast<std::size_t>(f.size) * static_cast<std::size_t>(f.size);
  const ChannelAffine affine = channel_affine(f.mean, f.std, 3);
  for (std::size_t p = 0; p < pixels; ++p) {
    for (int c = 0; c < 3; ++c) {
      float v = static_cast<float>(hwc[p * 3 + c]) * affine.scale[c] + affine.bias[c];
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
    case PixelType::kFloat32: convert_float(f, hwc, reinterpret_cast<float*>(dst), [](float v) { return v; }); return;
    case PixelType::kFloat16:
      convert_float(f, hwc, reinterpret_cast<std::uint16_t*>(dst), [](float v) { return float_to_half(v); });
      return;
  }
}

namespace {

template <class T, class Convert>
void erase_values(const BatchFormat& f, T* out, const std::array<std::int32_t, 4>& box,
                  std::optional<std::uint64_t> noise_seed, Convert convert) {
  const std::size_t side = static_cast<std::size_t>(f.size);
  const auto [top, left, height, width] = box;
  std::mt19937_64 rng(noise_seed.value_or(0));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // torchvision's noise is a [C, h, w] tensor: channel by channel.
  for (std::size_t c = 0; c < 3; ++c) {
    for (std::int32_t y = top; y < top + height; ++y) {
      for (std::int32_t x = left; x < left + width; ++x) {
        const std::size_t pixel = static_cast<std::size_t>(y) * side + static_cast<std::size_t>(x);
        const std::size_t at = f.layout == ImageLayout::kBHWC ? pixel * 3 + c : c * side * side + pixel;
        out[at] = convert(noise_seed ? normal(rng) : 0.0f);
      }
    }
  }
}

}  // namespace

void erase_image(const BatchFormat& f, std::byte* dst, const std::array<std::int32_t, 4>& box,
                 std::optional<std::uint64_t> noise_seed) {
  const auto [top, left, height, width] = box;
  if (top < 0 || left < 0 || height < 0 || width < 0 || top + height > f.size || left + width > f.size) return;
  switch (f.pixels) {
    case PixelType::kUInt8: return;
    case PixelType::kFloat32:
      erase_values(f, reinterpret_cast<float*>(dst), box, noise_seed, [](float v) { return v; });
      return;
    case PixelType::kFloat16:
      erase_values(f, reinterpret_cast<std::uint16_t*>(dst), box, noise_seed, [](float v) { return float_to_half(v); });
      return;
  }
}

}  // namespace tensorcom::pipeline
