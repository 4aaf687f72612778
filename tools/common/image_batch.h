// Finding the images and the labels in a batch, as tensorshow and tensorstat
// both need to, and reading tensor elements whatever their dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorcom/codec/half.h"
#include "tensorcom/codec/batch_layout.h"
#include "tensorcom/codec/tensor.h"

namespace tensorcom::tools {

struct ImageTensorInfo {
  std::size_t index = 0;  // position of the tensor in its batch
  ImageLayout layout = ImageLayout::kBHWC;
  std::int64_t batch = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t channels = 1;  // as stored: 1, 3 or 4 (RGBA)

  // Offset of element (b, y, x, c) in the tensor's values.
  [[nodiscard]] std::size_t offset(std::int64_t b, std::int64_t y, std::int64_t x, std::int64_t c) const noexcept {
    std::int64_t at = 0;
    switch (layout) {
      case ImageLayout::kBHWC: at = ((b * height + y) * width + x) * channels + c; break;
      case ImageLayout::kBCHW: at = ((b * channels + c) * height + y) * width + x; break;
      case ImageLayout::kBHW: at = (b * height + y) * width + x; break;
    }
    return static_cast<std::size_t>(at);
  }
  // Elements come in runs of one channel, the channels taking turns:
  // returns the length of a run (1 for BHWC, H*W for BCHW and BHW).
  [[nodiscard]] std::size_t channel_run() const noexcept {
    return layout == ImageLayout::kBHWC ? 1 : static_cast<std::size_t>(height * width);
  }
};

// Returns: how tensor holds a batch of images, or nothing if it does not:
//   dtype uint8, float16, float32 or float64, non-empty, and
//   ndim 4 with the last dim 1, 3 or 4 (BHWC, preferred when both fit),
//   ndim 4 with dim 1 equal to 1, 3 or 4 (BCHW), or ndim 3 (BHW, grey).
[[nodiscard]] std::optional<ImageTensorInfo> image_layout(const Tensor& tensor, std::size_t index = 0);

// Returns: the first tensor of batch that image_layout accepts.
[[nodiscard]] std::optional<ImageTensorInfo> find_images(std::span<const Tensor> batch);

// Returns: the index of the first integer tensor of shape (batch_size,).
[[nodiscard]] std::optional<std::size_t> find_labels(std::span<const Tensor> batch, std::int64_t batch_size);

// Returns: the elements of an integer tensor as int64 (uint64 values above
//   INT64_MAX wrap, as NumPy's astype does).
// Throws: ArgumentError for a floating-point tensor.
[[nodiscard]] std::vector<std::int64_t> integer_values(const Tensor& tensor);

[[nodiscard]] bool is_integer(DType dtype) noexcept;
[[nodiscard]] bool is_float(DType dtype) noexcept;

// Calls f(std::span<const T>) with the elements of tensor as its own element
// type T; float16 elements are first converted to a float copy, since C++
// has no half type. Returns what f returns.
template <class F>
decltype(auto) visit_values(const Tensor& tensor, F&& f) {
  switch (tensor.dtype()) {
    case DType::kFloat16: {
      auto halves = tensor.values<std::uint16_t>();
      std::vector<float> floats(halves.size());
      for (std::size_t i = 0; i < halves.size(); ++i) floats[i] = half_to_float(halves[i]);
      return f(std::span<const float>(floats));
    }
    case DType::kFloat32: return f(tensor.values<float>());
    case DType::kFloat64: return f(tensor.values<double>());
    case DType::kInt8: return f(tensor.values<std::int8_t>());
    case DType::kInt16: return f(tensor.values<std::int16_t>());
    case DType::kInt32: return f(tensor.values<std::int32_t>());
    case DType::kInt64: return f(tensor.values<std::int64_t>());
    case DType::kUInt8: return f(tensor.values<std::uint8_t>());
    case DType::kUInt16: return f(tensor.values<std::uint16_t>());
    case DType::kUInt32: return f(tensor.values<std::uint32_t>());
    case DType::kUInt64: return f(tensor.values<std::uint64_t>());
  }
  return f(tensor.values<std::uint8_t>());  // unreachable: the switch covers every dtype
}

// "uint8 (32, 224, 224, 3)" for messages.
[[nodiscard]] std::string describe_tensor(const Tensor& tensor);

}  // namespace tensorcom::tools
