// Small helpers shared by the doctest files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace tensorcom::testing {

inline std::vector<std::byte> to_bytes(std::span<const std::byte> s) { return {s.begin(), s.end()}; }

inline void put_i64(std::vector<std::byte>& bytes, std::size_t offset, std::int64_t value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

inline void put_text(std::vector<std::byte>& bytes, std::size_t offset, const char* text) {
  std::memset(bytes.data() + offset, 0, 8);
  std::memcpy(bytes.data() + offset, text, std::strlen(text));
}

}  // namespace tensorcom::testing
