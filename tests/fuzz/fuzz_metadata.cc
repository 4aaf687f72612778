// libFuzzer target: msgpack batch metadata decoding.
#include <cstddef>
#include <cstdint>

#include "tensorcom/codec/metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto meta = tensorcom::decode_metadata({reinterpret_cast<const std::byte*>(data), size});
    // A decoded map re-encodes and decodes to the same value.
    if (tensorcom::decode_metadata(tensorcom::encode_metadata(meta)) != meta) __builtin_trap();
  } catch (const tensorcom::FormatError&) {
  }
  return 0;
}
