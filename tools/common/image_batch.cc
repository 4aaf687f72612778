#include "image_batch.h"

namespace tensorcom::tools {

namespace {

bool is_channel_count(std::int64_t n) noexcept { return n == 1 || n == 3 || n == 4; }

bool is_image_dtype(DType dtype) noexcept { return dtype == DType::kUInt8 || is_float(dtype); }

}  // namespace

bool is_integer(DType dtype) noexcept { return !is_float(dtype); }

bool is_float(DType dtype) noexcept {
  return dtype == DType::kFloat16 || dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

std::optional<ImageTensorInfo> image_layout(const Tensor& tensor, std::size_t index) {
  if (!is_image_dtype(tensor.dtype()) || tensor.numel() == 0) return std::nullopt;
  const Shape& s = tensor.shape();
  ImageTensorInfo info;
  info.index = index;
  if (s.size() == 3) {
    info.layout = ImageLayout::kBHW;
    info.batch = s[0];
    info.height = s[1];
    info.width = s[2];
    info.channels = 1;
    return info;
  }
  if (s.size() != 4) return std::nullopt;
  info.batch = s[0];
  if (is_channel_count(s[3])) {
    info.layout = ImageLayout::kBHWC;
    info.height = s[1];
    info.width = s[2];
    info.channels = s[3];
    return info;
  }
  if (is_channel_count(s[1])) {
    info.layout = ImageLayout::kBCHW;
    info.channels = s[1];
    info.height = s[2];
    info.width = s[3];
    return info;
  }
  return std::nullopt;
}

std::optional<ImageTensorInfo> find_images(std::span<const Tensor> batch) {
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (auto info = image_layout(batch[i], i)) return info;
  }
  return std::nullopt;
}

std::optional<std::size_t> find_labels(std::span<const Tensor> batch, std::int64_t batch_size) {
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Tensor& t = batch[i];
    if (is_integer(t.dtype()) && t.ndim() == 1 && t.dim(0) == batch_size) return i;
  }
  return std::nullopt;
}

std::vector<std::int64_t> integer_values(const Tensor& tensor) {
  if (!is_integer(tensor.dtype())) {
    throw ArgumentError("integer_values: " + describe_tensor(tensor) + " is not an integer tensor");
  }
  return visit_values(tensor, [](auto values) {
    std::vector<std::int64_t> out(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = static_cast<std::int64_t>(values[i]);
    return out;
  });
}

std::string describe_tensor(const Tensor& tensor) {
  return std::string(dtype_name(tensor.dtype())) + " " + format_shape(tensor.shape());
}

}  // namespace tensorcom::tools
