// DeviceTensor, device dtypes and the checks of an image conversion: the
// parts of GPU feeding that need no CUDA, shared by both builds.
#include "tensorcom/gpu/device_tensor.h"

#include <limits>
#include <string>

#include "feeder_common.h"
#include "tensorcom/gpu/gpu_feeder.h"

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
  switch (layout) {
    case ImageLayout::kBHWC: return images;
    case ImageLayout::kBCHW: return {images[0], images[3], images[1], images[2]};
    case ImageLayout::kBHW: break;
  }
  throw ArgumentError("image conversion produces BCHW or BHWC images, not " + std::string(layout_name(layout)));
}

DeviceBatch::DeviceBatch(std::vector<DeviceTensor> tensors, int device, std::uint64_t sequence,
                         std::shared_ptr<detail::BatchLease> lease)
    : tensors_(std::move(tensors)), device_(device), sequence_(sequence), lease_(std::move(lease)) {}

namespace detail {

namespace {

// Runs check(), naming the image conversion in the message of its ArgumentError.
template <class Check>
decltype(auto) in_conversion(Check check) {
  try {
    return check();
  } catch (const ArgumentError& e) {
    throw ArgumentError(std::string("image conversion: ") + e.what());
  }
}

}  // namespace

void check_conversion(const ImageConversion& conversion) {
  if (conversion.dtype != DeviceDType::kFloat16 && conversion.dtype != DeviceDType::kBFloat16 &&
      conversion.dtype != DeviceDType::kFloat32) {
    throw ArgumentError("image conversion: dtype " + std::string(dtype_name(conversion.dtype)) +
                        " is not float16, bfloat16 or float32");
  }
  if (conversion.layout != ImageLayout::kBCHW && conversion.layout != ImageLayout::kBHWC) {
    throw ArgumentError("image conversion: layout " + std::string(layout_name(conversion.layout)) +
                        " is not BCHW or BHWC");
  }
  in_conversion([&] { check_mean_std(conversion.mean, conversion.std); });
}

ChannelAffine channel_affine(const ImageConversion& conversion, std::int64_t channels) {
  check_conversion(conversion);
  return in_conversion(
      [&] { return tensorcom::channel_affine(conversion.mean, conversion.std, static_cast<std::size_t>(channels)); });
}

}  // namespace detail
}  // namespace tensorcom
