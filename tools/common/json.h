// The little JSON the tools need: writing one-line objects for machine
// readers (tensormon --json, tensorstat --json), and reading a table of class
// names (tensorshow -C classes.json). No JSON library is a dependency.
#pragma once

#include <concepts>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>

namespace tensorcom::tools {

// Returns: the shortest text that reads back as exactly `value` ("10",
// "0.25", "1e+21"); "null" for NaN and infinities, which JSON cannot spell.
[[nodiscard]] std::string json_number(double value);

// Returns: text as a quoted JSON string, with '"', '\\' and control
// characters escaped. Bytes >= 0x80 pass through (the input is UTF-8).
[[nodiscard]] std::string json_string(std::string_view text);

// Returns: "[a,b,c]" from already-formatted JSON values.
[[nodiscard]] std::string json_array(std::span<const std::string> values);
// Returns: a JSON array of numbers (json_number of each).
[[nodiscard]] std::string json_number_array(std::span<const double> values);

// Builds one JSON object, fields in the order added. Keys are not checked
// for duplicates: the tools add fixed keys.
class JsonObject {
 public:
  JsonObject& add_number(std::string_view key, double value);
  template <std::integral T>
  JsonObject& add_integer(std::string_view key, T value) {
    return add_json(key, std::to_string(value));
  }
  JsonObject& add_bool(std::string_view key, bool value);
  JsonObject& add_string(std::string_view key, std::string_view value);
  // Adds a value that is already JSON text (a nested object or array).
  JsonObject& add_json(std::string_view key, std::string_view json);

  // Returns: "{...}" on one line.
  [[nodiscard]] std::string str() const { return "{" + fields_ + "}"; }

 private:
  std::string fields_;
};

// Class names by label.
using ClassNames = std::map<std::int64_t, std::string>;

// Parses a class-name table, strictly (no comments, no trailing commas, no
// duplicate labels). Accepted forms:
//   ["tench", "goldfish"]                  label = position
//   {"0": "tench", "1": "goldfish"}        keys: decimal integers, quoted
//   {0: "tench", 1: "goldfish"}            or bare (not JSON, but common)
//   {"0": ["n01440764", "tench"], ...}     an array value names the class by
//                                          its last string (Keras'
//                                          imagenet_class_index.json)
// source names the text in errors (the file name).
// Throws: FormatError "SOURCE: line L, column C: what was wrong (at byte N)".
[[nodiscard]] ClassNames parse_class_names(std::string_view text, std::string_view source);

// Reads and parses a class-name file.
// Throws: IoError if it cannot be read; FormatError as parse_class_names.
[[nodiscard]] ClassNames read_class_names(const std::filesystem::path& path);

}  // namespace tensorcom::tools
