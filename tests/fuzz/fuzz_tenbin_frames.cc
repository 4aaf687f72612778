// libFuzzer target: multipart decoding. The input is cut into frames by its
// own length bytes, so the fuzzer controls frame count and sizes.
#include <fuzzer/FuzzedDataProvider.h>

#include <vector>

#include "tensorcom/codec/tenbin.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  std::vector<std::vector<std::uint8_t>> storage;
  while (input.remaining_bytes() > 0 && storage.size() < 64) {
    auto length = input.ConsumeIntegralInRange<std::size_t>(0, 256);
    storage.push_back(input.ConsumeBytes<std::uint8_t>(length));
  }
  std::vector<tensorcom::FrameView> frames;
  for (const auto& frame : storage) {
    frames.push_back({std::as_bytes(std::span(frame)), nullptr});
  }
  try {
    tensorcom::TensorList list = tensorcom::decode_message(frames);
    std::size_t sum = 0;
    for (const auto& t : list) {
      for (std::byte b : t.bytes()) sum += static_cast<std::size_t>(b);
    }
    return static_cast<int>(sum & 0);
  } catch (const tensorcom::FormatError&) {
    return 0;
  }
}
