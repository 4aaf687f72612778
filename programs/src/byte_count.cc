#include "tensorcom/programs/byte_count.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "tensorcom/codec/error.h"

namespace tensorcom::programs {

std::uint64_t parse_byte_count(const std::string& text, std::string_view flag) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  // 2^63 keeps the conversion defined and is far beyond any file.
  if (text.empty() || *end != '\0' || errno != 0 || !(value >= 1) || value > 9.2e18 || value != std::floor(value)) {
    throw ArgumentError(std::string(flag) + " must be a whole number of bytes >= 1, got '" + text + "'");
  }
  return static_cast<std::uint64_t>(value);
}

}  // namespace tensorcom::programs
