// libFuzzer target: single-buffer tenbin decoding (.ten files, one-frame messages).
#include <cstddef>
#include <cstdint>

#include "tensorcom/codec/tenbin.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    tensorcom::TensorList list = tensorcom::decode_buffer(bytes);
    // Every view must lie inside the input: touch each byte.
    std::size_t sum = 0;
    for (const auto& t : list) {
      for (std::byte b : t.bytes()) sum += static_cast<std::size_t>(b);
    }
    if (!list.empty()) {
      // What decoded must re-encode to what was read.
      tensorcom::SharedBuffer again = tensorcom::encode_buffer(list);
      tensorcom::TensorList back = tensorcom::decode_buffer(again.bytes());
      if (back.size() != list.size()) __builtin_trap();
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (!back[i].same_as(list[i])) __builtin_trap();
      }
    }
    return static_cast<int>(sum & 0);
  } catch (const tensorcom::FormatError&) {
    return 0;
  }
}
