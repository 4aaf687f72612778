// The class label of a sample: the text of its .cls member (ASCII decimal,
// whitespace around it allowed), or a label known without text (ImageFolder).
// The text comes from shards, that is from anywhere: fuzzed by
// tests/fuzz/fuzz_sample_label.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "raw_sample.h"
#include "tensorcom/imaging/problem.h"

namespace tensorcom::pipeline {

// A sample's label, or why it has none usable.
struct Label {
  std::int32_t value = 0;  // 0 when there is a problem
  std::optional<imaging::Problem>
      problem;         // none when value is good, else kMissingLabel, kBadLabel or kLabelOutOfRange
  std::string detail;  // for the skip message: the text (its first 40 bytes) or the value
};

// Returns sample.known_label when set, else the .cls text as an integer in
// 0..classes-1 (0..INT32_MAX when classes <= 0), else the problem.
[[nodiscard]] Label label_of(const RawSample& sample, std::int32_t classes);

}  // namespace tensorcom::pipeline
