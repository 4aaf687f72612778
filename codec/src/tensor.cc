#include "tensorcom/codec/tensor.h"

#include <cstring>
#include <limits>
#include <new>

namespace tensorcom {

std::optional<std::uint64_t> checked_nbytes(std::span<const std::int64_t> shape, std::size_t itemsize) noexcept {
  std::uint64_t total = itemsize;
  for (std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(dim), &total)) return std::nullopt;
  }
  return total;
}

std::string format_shape(std::span<const std::int64_t> shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  return out + ")";
}

SharedBuffer SharedBuffer::allocate(std::size_t size) {
  // Round up so the tail of the last cache line is ours too (vectorised
  // kernels may touch it), and never ask for zero bytes.
  std::size_t rounded = (size + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  if (rounded < size) throw ArgumentError("cannot allocate " + std::to_string(size) + " bytes");
  if (rounded == 0) rounded = kTensorAlignment;
  auto* raw = static_cast<std::byte*>(::operator new (rounded, std::align_val_t{kTensorAlignment}));
  SharedBuffer buffer;
  buffer.data_ =
      std::shared_ptr<std::byte>(raw, [](std::byte* p) { ::operator delete (p, std::align_val_t{kTensorAlignment}); });
  buffer.size_ = size;
  return buffer;
}

namespace {

void check_info(std::string_view info) {
  bool ok = info.size() <= kMaxInfoLength;
  for (char c : info) ok = ok && c > 0;  // ASCII without NUL: the wire pads with NULs
  if (!ok) {
    throw ArgumentError("tensor info '" + std::string(info) + "' is not at most " + std::to_string(kMaxInfoLength) +
                        " ASCII characters");
  }
}

std::size_t nbytes_or_throw(DType dtype, const Shape& shape) {
  auto nbytes = checked_nbytes(shape, itemsize(dtype));
  if (!nbytes || *nbytes > std::numeric_limits<std::size_t>::max() / 2) {
    throw ArgumentError("invalid tensor shape " + format_shape(shape) + " for " + std::string(dtype_name(dtype)));
  }
  return static_cast<std::size_t>(*nbytes);
}

}  // namespace

Tensor::Tensor() : shape_{0} {}

Tensor::Tensor(DType dtype, Shape shape, std::size_t nbytes, std::byte* data, std::shared_ptr<const void> owner,
               std::string_view info)
    : dtype_(dtype), shape_(std::move(shape)), nbytes_(nbytes), data_(data), owner_(std::move(owner)) {
  set_info(info);
}

Tensor Tensor::allocate(DType dtype, Shape shape, std::string_view info) {
  std::size_t nbytes = nbytes_or_throw(dtype, shape);
  SharedBuffer buffer = SharedBuffer::allocate(nbytes);
  return Tensor(dtype, std::move(shape), nbytes, buffer.data(), buffer.owner(), info);
}

Tensor Tensor::zeros(DType dtype, Shape shape, std::string_view info) {
  Tensor t = allocate(dtype, std::move(shape), info);
  if (t.nbytes_ != 0) std::memset(t.data_, 0, t.nbytes_);
  return t;
}

Tensor Tensor::view(DType dtype, Shape shape, void* data, std::shared_ptr<const void> owner, std::string_view info) {
  std::size_t nbytes = nbytes_or_throw(dtype, shape);
  return Tensor(dtype, std::move(shape), nbytes, static_cast<std::byte*>(data), std::move(owner), info);
}

void Tensor::set_info(std::string_view info) {
  check_info(info);
  info_.assign(info);
}

bool Tensor::same_as(const Tensor& other) const noexcept {
  return dtype_ == other.dtype_ && shape_ == other.shape_ && info_ == other.info_ && nbytes_ == other.nbytes_ &&
         (nbytes_ == 0 || std::memcmp(data_, other.data_, nbytes_) == 0);
}

void Tensor::check_element_type(DType requested, std::size_t requested_size) const {
  bool half_as_u16 = dtype_ == DType::kFloat16 && requested == DType::kUInt16;
  if (requested != dtype_ && !half_as_u16) {
    throw ArgumentError("tensor of " + std::string(dtype_name(dtype_)) + " read as " +
                        std::string(dtype_name(requested)) + " (" + std::to_string(requested_size) + "-byte elements)");
  }
}

}  // namespace tensorcom
