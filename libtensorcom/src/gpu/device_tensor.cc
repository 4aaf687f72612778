// DeviceTensor, device dtypes and the checks of an image conversion: the
// parts of GPU feeding that need no CUDA, shared by both builds.
#include "tensorcom/device_tensor.h"

#include <limits>

#include "feeder_common.h"
#include "tensorcom/gpu_feeder.h"

namespace tensorcom {

std::size_t itemsize(DeviceDType dtype) noexcept {
  if (dtype == DeviceDType::kBFloat16) return 2;
  return itemsize(static_cast<DType>(dtype));
}

std::string_view dtype_name(DeviceDType dtype) noexcept {
  if (dtype == DeviceDType::kBFloat16) return "bfloat16";
  return dtype_name(static_cast<DType>(dtype));
}

DeviceTensor::DeviceTensor(DeviceDType dtype, Shape shape, int device, void* data, std::shared_ptr<const void> owner,
                           std::string_view info)
    : dtype_(dtype), shape_(std::move(shape)), info_(info), device_(device), data_(data), owner_(std::move(owner)) {
  auto nbytes = checked_nbytes(shape_, itemsize(dtype_));
  if (!nbytes || *nbytes > std::numeric_limits<std::size_t>::max() / 2) {
    throw ArgumentError("invalid device tensor shape " + format_shape(shape_) + " for " +
                        std::string(dtype_name(dtype_)));
  }
  nbytes_ = static_cast<std::size_t>(*nbytes);
}

Shape converted_shape(const Shape& images, ImageLayout layout) {
  if (images.size() != 4 || images[3] < 1 || images[3] > 4) {
    throw ArgumentError("image conversion needs uint8 images of shape (B, H, W, C) with 1 <= C <= 4, not " +
                        format_shape(images));
  }
  if (layout == ImageLayout::kNHWC) return images;
  return {images[0], images[3], images[1], images[2]};
}

DeviceBatch::DeviceBatch(std::vector<DeviceTensor> tensors, int device, std::uint64_t sequence,
                         std::shared_ptr<detail::BatchLease> lease)
    : tensors_(std::move(tensors)), device_(device), sequence_(sequence), lease_(std::move(lease)) {}

namespace detail {

void check_conversion(const ImageConversion& conversion) {
  if (conversion.dtype != DeviceDType::kFloat16 && conversion.dtype != DeviceDType::kBFloat16 &&
      conversion.dtype != DeviceDType::kFloat32) {
    throw ArgumentError("image conversion: dtype " + std::string(dtype_name(conversion.dtype)) +
                        " is not float16, bfloat16 or float32");
  }
  for (const auto* values : {&conversion.mean, &conversion.std}) {
    if (values->empty() || values->size() > kMaxChannels) {
      throw ArgumentError("image conversion: mean and std need 1 to 4 values, not " + std::to_string(values->size()));
    }
  }
  for (float s : conversion.std) {
    if (!(s != 0.0f) || !std::isfinite(s)) throw ArgumentError("image conversion: std " + std::to_string(s) + " is zero or not finite");
  }
}

ChannelAffine channel_affine(const ImageConversion& conversion, std::int64_t channels) {
  check_conversion(conversion);
  auto pick = [&](const std::vector<float>& values, std::int64_t c, const char* name) {
    if (values.size() == 1) return values[0];
    if (static_cast<std::int64_t>(values.size()) != channels) {
      throw ArgumentError(std::string("image conversion: ") + name + " has " + std::to_string(values.size()) +
                          " values for " + std::to_string(channels) + " channels");
    }
    return values[static_cast<std::size_t>(c)];
  };
  ChannelAffine affine;
  for (std::int64_t c = 0; c < channels; ++c) {
    // (x / 255 - mean) / std == x * scale + bias
    const float mean = pick(conversion.mean, c, "mean"), std = pick(conversion.std, c, "std");
    affine.scale[c] = 1.0f / (255.0f * std);
    affine.bias[c] = -mean / std;
  }
  return affine;
}

}  // namespace detail
}  // namespace tensorcom
