// libFuzzer target: tensorcom URL parsing and brace expansion (URLs and shard
// lists come from command lines and config files).
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensorcom/transport/brace.h"
#include "tensorcom/transport/url.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)tensorcom::parse_url(text);
  } catch (const tensorcom::Error&) {
  }
  try {
    // Expansion is bounded by kMaxBraceExpansions; keep each run quick.
    if (size <= 64) (void)tensorcom::brace_expand(text);
  } catch (const tensorcom::Error&) {
  }
  return 0;
}
