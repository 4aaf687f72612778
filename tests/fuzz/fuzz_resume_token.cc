// libFuzzer target: resume tokens (JSON files a job hands its servers). A
// token parses into sorted, disjoint, non-empty ranges at or past its first
// epoch, or throws ArgumentError; nothing else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "resume_token.h"
#include "tensorcom/codec/error.h"

using namespace tensorcom::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const StreamIdentity identity{"0/1", "0123456789abcdef", 7, 12};
  try {
    const StreamResume r = parse_resume_token({reinterpret_cast<const char*>(data), size}, "fuzz", identity);
    for (const auto& [epoch, ranges] : r.consumed) {
      if (epoch < r.first_epoch) __builtin_trap();
      for (std::size_t i = 0; i < ranges.size(); ++i) {
        if (ranges[i].first >= ranges[i].second || ranges[i].second > 12) __builtin_trap();
        if (i && ranges[i].first <= ranges[i - 1].second) __builtin_trap();
      }
    }
  } catch (const tensorcom::ArgumentError&) {
  }
  return 0;
}
