#include "sample_label.h"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <string_view>

namespace tensorcom::pipeline {

Label label_of(const RawSample& sample, std::int32_t classes) {
  if (sample.known_label) return {*sample.known_label, {}, {}};
  if (!sample.label) return {0, imaging::Problem::kMissingLabel, "no .cls member"};
  std::string_view text = *sample.label;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return {0, imaging::Problem::kBadLabel, "cls is '" + std::string(text.substr(0, 40)) + "'"};
  }
  if (value < 0 || value > INT32_MAX || (classes > 0 && value >= classes)) {
    return {0, imaging::Problem::kLabelOutOfRange, std::to_string(value)};
  }
  return {static_cast<std::int32_t>(value), {}, {}};
}

}  // namespace tensorcom::pipeline
