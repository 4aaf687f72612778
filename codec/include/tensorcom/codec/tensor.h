// Tensors: a dtype, a C-order shape, an 8-character info string, and a pointer
// to contiguous data whose lifetime is held by a shared owner. A tensor either
// owns 64-byte-aligned memory it allocated, or is a zero-copy view of memory
// owned by something else (a received message, a mapped file) that the owner
// keeps alive for as long as any view of it exists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorcom/codec/dtype.h"
#include "tensorcom/codec/error.h"

namespace tensorcom {

using Shape = std::vector<std::int64_t>;

// The alignment of memory the codec allocates.
inline constexpr std::size_t kTensorAlignment = 64;
// The info field holds at most this many ASCII characters.
inline constexpr std::size_t kMaxInfoLength = 8;

// Returns prod(shape) * itemsize, or nothing if a dimension is negative or the
// product overflows 64 bits.
[[nodiscard]] std::optional<std::uint64_t> checked_nbytes(std::span<const std::int64_t> shape,
                                                          std::size_t itemsize) noexcept;

// "(2, 3)" for {2, 3}, "(5,)" for {5}, "()" for a 0-d shape, as NumPy prints them.
[[nodiscard]] std::string format_shape(std::span<const std::int64_t> shape);

// Shared, 64-byte-aligned bytes. Copies share the same memory.
class SharedBuffer {
 public:
  SharedBuffer() = default;
  // Allocates size bytes, contents unspecified. Throws ArgumentError if size is absurd.
  [[nodiscard]] static SharedBuffer allocate(std::size_t size);

  [[nodiscard]] std::byte* data() const noexcept { return data_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {data_.get(), size_}; }
  // The owner to hand to views of this memory.
  [[nodiscard]] std::shared_ptr<const void> owner() const noexcept { return data_; }

 private:
  std::shared_ptr<std::byte> data_;
  std::size_t size_ = 0;
};

class Tensor {
 public:
  // An empty uint8 tensor of shape (0,).
  Tensor();

  // Allocates 64-byte-aligned memory for the shape; contents unspecified.
  // Throws ArgumentError for a negative or overflowing shape or a bad info.
  [[nodiscard]] static Tensor allocate(DType dtype, Shape shape, std::string_view info = {});
  // As allocate, with every byte zero.
  [[nodiscard]] static Tensor zeros(DType dtype, Shape shape, std::string_view info = {});
  // A view of nbytes(dtype, shape) bytes at data, which the caller guarantees
  // stay valid while owner lives (owner may be null when the caller manages
  // the lifetime itself). Writing through the view writes that memory.
  [[nodiscard]] static Tensor view(DType dtype, Shape shape, void* data, std::shared_ptr<const void> owner,
                                   std::string_view info = {});
  // A new tensor holding a copy of values, for tests and small tensors.
  template <class T>
  [[nodiscard]] static Tensor from_values(Shape shape, std::span<const T> values, std::string_view info = {});

  [[nodiscard]] DType dtype() const noexcept { return dtype_; }
  [[nodiscard]] const Shape& shape() const noexcept { return shape_; }
  [[nodiscard]] std::size_t ndim() const noexcept { return shape_.size(); }
  [[nodiscard]] std::int64_t dim(std::size_t i) const { return shape_.at(i); }
  [[nodiscard]] std::uint64_t numel() const noexcept { return nbytes_ / itemsize(dtype_); }
  [[nodiscard]] std::size_t nbytes() const noexcept { return nbytes_; }
  [[nodiscard]] std::string_view info() const noexcept { return info_; }
  // Throws ArgumentError unless info is at most 8 ASCII characters without NUL.
  void set_info(std::string_view info);

  [[nodiscard]] std::byte* data() noexcept { return data_; }
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, nbytes_}; }
  [[nodiscard]] std::span<std::byte> bytes() noexcept { return {data_, nbytes_}; }
  // The elements as T. Throws ArgumentError unless T matches the dtype
  // (float16 is read as std::uint16_t).
  template <class T>
  [[nodiscard]] std::span<T> values();
  template <class T>
  [[nodiscard]] std::span<const T> values() const;

  // What keeps the data alive; null for a view whose lifetime the caller manages.
  [[nodiscard]] const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

  // Same dtype, shape, info and bytes.
  [[nodiscard]] bool same_as(const Tensor& other) const noexcept;

 private:
  Tensor(DType dtype, Shape shape, std::size_t nbytes, std::byte* data, std::shared_ptr<const void> owner,
         std::string_view info);
  void check_element_type(DType requested, std::size_t requested_size) const;

  DType dtype_ = DType::kUInt8;
  Shape shape_;
  std::string info_;
  std::size_t nbytes_ = 0;
  std::byte* data_ = nullptr;
  std::shared_ptr<const void> owner_;
};

using TensorList = std::vector<Tensor>;

// ---- template definitions ----

template <class T>
Tensor Tensor::from_values(Shape shape, std::span<const T> values, std::string_view info) {
  Tensor t = allocate(dtype_of<std::remove_const_t<T>>(), std::move(shape), info);
  if (values.size_bytes() != t.nbytes()) {
    throw ArgumentError("from_values: " + std::to_string(values.size()) + " values do not fill shape " +
                        format_shape(t.shape()));
  }
  if (t.nbytes_ != 0) std::memcpy(t.data_, values.data(), t.nbytes_);
  return t;
}

template <class T>
std::span<T> Tensor::values() {
  check_element_type(dtype_of<std::remove_const_t<T>>(), sizeof(T));
  return {reinterpret_cast<T*>(data_), nbytes_ / sizeof(T)};
}

template <class T>
std::span<const T> Tensor::values() const {
  check_element_type(dtype_of<std::remove_const_t<T>>(), sizeof(T));
  return {reinterpret_cast<const T*>(data_), nbytes_ / sizeof(T)};
}

}  // namespace tensorcom
