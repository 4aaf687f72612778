// libFuzzer target: class labels from .cls members (shard text from
// anywhere). The first byte chooses the class count and whether the sample
// has a .cls member at all; the rest is the member's text. A label comes out
// in range, or a problem with value 0 and a short detail.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sample_label.h"

using namespace tensorcom::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static constexpr std::int32_t kClasses[] = {0, -1, 1, 10, 1000, INT32_MAX, INT32_MIN, 7};
  const std::int32_t classes = kClasses[data[0] & 7];
  RawSample sample;
  if (!(data[0] & 0x80)) sample.label = std::string(reinterpret_cast<const char*>(data + 1), size - 1);
  const Label label = label_of(sample, classes);
  if (!label.problem) {
    if (label.value < 0 || (classes > 0 && label.value >= classes)) __builtin_trap();
  } else {
    if (label.value != 0) __builtin_trap();
    if (label.detail.size() > 64) __builtin_trap();  // quotes at most 40 bytes of the text
  }
  if (!sample.label && label.problem != tensorcom::imaging::Problem::kMissingLabel) __builtin_trap();
  return 0;
}
