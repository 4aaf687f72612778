// Tensors in GPU memory, as the GPU feeder (gpu_feeder.h) hands them out: a
// dtype, a C-order shape, the CUDA device ordinal and a device pointer, plus a
// shared owner that keeps the memory out of the feeder's pool while any copy
// of the tensor exists. This header includes nothing of CUDA: a device pointer
// is a void* here, to be cast to the element type in the caller's CUDA code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

#include "tensorcom/codec/dtype.h"
#include "tensorcom/codec/tensor.h"

namespace tensorcom {

// Element types on the GPU: every tenbin dtype, with DType's value, plus
// bfloat16 (after them), which the image conversion can produce but tenbin
// cannot carry.
enum class DeviceDType : std::uint8_t {
  kFloat16 = static_cast<std::uint8_t>(DType::kFloat16),
  kFloat32 = static_cast<std::uint8_t>(DType::kFloat32),
  kFloat64 = static_cast<std::uint8_t>(DType::kFloat64),
  kInt8 = static_cast<std::uint8_t>(DType::kInt8),
  kInt16 = static_cast<std::uint8_t>(DType::kInt16),
  kInt32 = static_cast<std::uint8_t>(DType::kInt32),
  kInt64 = static_cast<std::uint8_t>(DType::kInt64),
  kUInt8 = static_cast<std::uint8_t>(DType::kUInt8),
  kUInt16 = static_cast<std::uint8_t>(DType::kUInt16),
  kUInt32 = static_cast<std::uint8_t>(DType::kUInt32),
  kUInt64 = static_cast<std::uint8_t>(DType::kUInt64),
  kBFloat16 = static_cast<std::uint8_t>(std::size(kAllDTypes)),
};

namespace detail {
// True when DType's values are 0 .. N-1 for its N dtypes, so that each keeps
// its value as a DeviceDType and kBFloat16 (N) is none of them.
constexpr bool dtype_values_are_dense() noexcept {
  bool seen[std::size(kAllDTypes)] = {};
  for (DType dtype : kAllDTypes) {
    const auto value = static_cast<std::size_t>(dtype);
    if (value >= std::size(kAllDTypes) || seen[value]) return false;
    seen[value] = true;
  }
  return true;
}
}  // namespace detail
static_assert(detail::dtype_values_are_dense(), "DeviceDType keeps DType's values: they must be 0 .. N-1");
static_assert(std::size(kAllDTypes) == 11, "a new DType needs its DeviceDType enumerator");

// The device dtype of a tenbin dtype (the same value, by construction above).
[[nodiscard]] constexpr DeviceDType device_dtype(DType dtype) noexcept { return static_cast<DeviceDType>(dtype); }
// Bytes per element: 1, 2, 4 or 8.
[[nodiscard]] std::size_t itemsize(DeviceDType dtype) noexcept;
// NumPy's (and PyTorch's) name: "float16" ... "uint64", "bfloat16".
[[nodiscard]] std::string_view dtype_name(DeviceDType dtype) noexcept;

// A view of device memory. Copies share the memory and its owner; the memory
// stays valid (and out of the feeder's pool) until the last copy is gone.
// Thread safety: as a std::shared_ptr.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  // A view of nbytes(dtype, shape) bytes at data on CUDA device `device`,
  // kept valid by owner (which may be null when the caller manages the
  // lifetime). Throws ArgumentError for a negative or overflowing shape.
  DeviceTensor(DeviceDType dtype, Shape shape, int device, void* data, std::shared_ptr<const void> owner,
               std::string_view info = {});

  [[nodiscard]] DeviceDType dtype() const noexcept { return dtype_; }
  [[nodiscard]] const Shape& shape() const noexcept { return shape_; }
  [[nodiscard]] std::size_t ndim() const noexcept { return shape_.size(); }
  [[nodiscard]] std::int64_t dim(std::size_t i) const { return shape_.at(i); }
  [[nodiscard]] std::uint64_t numel() const noexcept { return nbytes_ / itemsize(dtype_); }
  [[nodiscard]] std::size_t nbytes() const noexcept { return nbytes_; }
  [[nodiscard]] std::string_view info() const noexcept { return info_; }
  // The CUDA device ordinal the memory is on (-1 for an empty tensor).
  [[nodiscard]] int device() const noexcept { return device_; }
  // The device pointer (what cudaMalloc returned, plus an offset).
  [[nodiscard]] void* data() const noexcept { return data_; }
  // The device pointer as an integer, for DLPack and __cuda_array_interface__.
  [[nodiscard]] std::uintptr_t address() const noexcept { return reinterpret_cast<std::uintptr_t>(data_); }
  // What keeps the memory alive; null when the caller manages the lifetime.
  [[nodiscard]] const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

 private:
  DeviceDType dtype_ = DeviceDType::kUInt8;
  Shape shape_;
  std::string info_;
  std::size_t nbytes_ = 0;
  int device_ = -1;
  void* data_ = nullptr;
  std::shared_ptr<const void> owner_;
};

}  // namespace tensorcom
