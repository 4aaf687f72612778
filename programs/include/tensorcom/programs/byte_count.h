// Byte counts given on command lines: "1000000", "1e9", "2.5e8".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tensorcom::programs {

// Parses a whole number of bytes >= 1 (plain or in exponent notation, below
// 2^63). Throws ArgumentError naming `flag` and the text.
[[nodiscard]] std::uint64_t parse_byte_count(const std::string& text, std::string_view flag);

}  // namespace tensorcom::programs
