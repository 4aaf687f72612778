// JSON for the tools, on nlohmann::json: the one-line objects written for
// machine readers (tensormon --json, tensorstat --json), and the table of class
// names read by tensorshow -C classes.json.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

namespace tensorcom::tools {

// What the tools print: objects keep their fields in the order added, as
// docs/tools.md shows them. dump() writes numbers so that they read back
// exactly (integers as integers, doubles as the shortest text that reads back,
// with ".0" on integral ones), NaN and infinities as null, and strings with
// '"', '\\' and control characters escaped.
using Json = nlohmann::ordered_json;

// Class names by label.
using ClassNames = std::map<std::int64_t, std::string>;

// Parses a class-name table: strict JSON (no comments, no trailing commas)
// and no label twice. Accepted forms:
//   ["tench", "goldfish"]                  label = position
//   {"0": "tench", "1": "goldfish"}        keys: decimal integers
//   {"0": ["n01440764", "tench"], ...}     an array value names the class by
//                                          its last string (Keras'
//                                          imagenet_class_index.json)
// source names the text in errors (the file name).
// Throws: FormatError "SOURCE: line L, column C: what was wrong (at byte N)",
// N the byte where reading stopped: the offending character, or the end of
// the key or value that was refused.
[[nodiscard]] ClassNames parse_class_names(std::string_view text, std::string_view source);

// Reads and parses a class-name file.
// Throws: IoError if it cannot be read; FormatError as parse_class_names.
[[nodiscard]] ClassNames read_class_names(const std::filesystem::path& path);

}  // namespace tensorcom::tools
