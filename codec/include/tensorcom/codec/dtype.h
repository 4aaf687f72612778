// Element types of tenbin tensors and their codes on the wire
// (see the format document: the dtype word holds "f2", "i4", "u1", ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tensorcom {

enum class DType : std::uint8_t {
  kFloat16,
  kFloat32,
  kFloat64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
};

inline constexpr DType kAllDTypes[] = {
    DType::kFloat16, DType::kFloat32, DType::kFloat64, DType::kInt8,   DType::kInt16,  DType::kInt32,
    DType::kInt64,   DType::kUInt8,   DType::kUInt16,  DType::kUInt32, DType::kUInt64,
};

// Bytes per element: 1, 2, 4 or 8.
[[nodiscard]] std::size_t itemsize(DType dtype) noexcept;

// The wire code: "f2" "f4" "f8" "i1" "i2" "i4" "i8" "u1" "u2" "u4" "u8".
[[nodiscard]] std::string_view dtype_code(DType dtype) noexcept;

// NumPy's name: "float16" ... "uint64".
[[nodiscard]] std::string_view dtype_name(DType dtype) noexcept;

// Returns the dtype for a wire code, or nothing if the code is unknown.
[[nodiscard]] std::optional<DType> dtype_from_code(std::string_view code) noexcept;

// Returns the dtype for a NumPy name or a wire code, or nothing.
[[nodiscard]] std::optional<DType> parse_dtype(std::string_view name) noexcept;

// The dtype of a C++ element type: dtype_of<float>() == DType::kFloat32.
// Half floats have no portable C++ type; use DType::kFloat16 with uint16_t storage.
template <class T>
[[nodiscard]] constexpr DType dtype_of() noexcept;

// One specialisation a line reads as the table it is.
// clang-format off
template <> constexpr DType dtype_of<float>() noexcept { return DType::kFloat32; }
template <> constexpr DType dtype_of<double>() noexcept { return DType::kFloat64; }
template <> constexpr DType dtype_of<std::int8_t>() noexcept { return DType::kInt8; }
template <> constexpr DType dtype_of<std::int16_t>() noexcept { return DType::kInt16; }
template <> constexpr DType dtype_of<std::int32_t>() noexcept { return DType::kInt32; }
template <> constexpr DType dtype_of<std::int64_t>() noexcept { return DType::kInt64; }
template <> constexpr DType dtype_of<std::uint8_t>() noexcept { return DType::kUInt8; }
template <> constexpr DType dtype_of<std::uint16_t>() noexcept { return DType::kUInt16; }
template <> constexpr DType dtype_of<std::uint32_t>() noexcept { return DType::kUInt32; }
template <> constexpr DType dtype_of<std::uint64_t>() noexcept { return DType::kUInt64; }
// clang-format on

}  // namespace tensorcom
