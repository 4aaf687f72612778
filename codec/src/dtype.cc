#include "tensorcom/codec/dtype.h"

namespace tensorcom {
namespace {

struct DTypeInfo {
  DType dtype;
  std::size_t itemsize;
  std::string_view code;
  std::string_view name;
};

// Index = the enum's value. The reference's table spells uint32 "unit32";
// we use the right name so u4 works in both directions.
constexpr DTypeInfo kTable[] = {
    {DType::kFloat16, 2, "f2", "float16"}, {DType::kFloat32, 4, "f4", "float32"}, {DType::kFloat64, 8, "f8", "float64"},
    {DType::kInt8, 1, "i1", "int8"},       {DType::kInt16, 2, "i2", "int16"},     {DType::kInt32, 4, "i4", "int32"},
    {DType::kInt64, 8, "i8", "int64"},     {DType::kUInt8, 1, "u1", "uint8"},     {DType::kUInt16, 2, "u2", "uint16"},
    {DType::kUInt32, 4, "u4", "uint32"},   {DType::kUInt64, 8, "u8", "uint64"},
};

const DTypeInfo& info_of(DType dtype) noexcept { return kTable[static_cast<std::size_t>(dtype)]; }

}  // namespace

std::size_t itemsize(DType dtype) noexcept { return info_of(dtype).itemsize; }
std::string_view dtype_code(DType dtype) noexcept { return info_of(dtype).code; }
std::string_view dtype_name(DType dtype) noexcept { return info_of(dtype).name; }

std::optional<DType> dtype_from_code(std::string_view code) noexcept {
  for (const auto& entry : kTable) {
    if (entry.code == code) return entry.dtype;
  }
  return std::nullopt;
}

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (const auto& entry : kTable) {
    if (entry.name == name || entry.code == name) return entry.dtype;
  }
  return std::nullopt;
}

}  // namespace tensorcom
