// Small helpers shared by the doctest files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <span>
#include <string>
#include <vector>

#include <stdlib.h>

#include "tensorcom/codec/tensor.h"

namespace tensorcom::testing {

inline std::vector<std::byte> to_bytes(std::span<const std::byte> s) { return {s.begin(), s.end()}; }

inline void put_i64(std::vector<std::byte>& bytes, std::size_t offset, std::int64_t value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

inline void put_text(std::vector<std::byte>& bytes, std::size_t offset, const char* text) {
  std::memset(bytes.data() + offset, 0, 8);
  std::memcpy(bytes.data() + offset, text, std::strlen(text));
}

// Whether two sequences of lists hold the same tensors (same_as), in order.
inline bool same_lists(const std::vector<TensorList>& a, const std::vector<TensorList>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t l = 0; l < a.size(); ++l) {
    if (a[l].size() != b[l].size()) return false;
    for (std::size_t t = 0; t < a[l].size(); ++t) {
      if (!a[l][t].same_as(b[l][t])) return false;
    }
  }
  return true;
}

// A fresh directory under the system's temp dir, removed with its contents.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tensorcom-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace tensorcom::testing
