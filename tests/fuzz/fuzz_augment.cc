// libFuzzer target: decoding and augmenting one image from a shard (JPEG
// region decoding, CMYK and greyscale conversion, OpenCV for the rest). The
// first 8 bytes choose the transform and seed the crop, the rest is the
// image; it must come out as size x size pixels or be refused with a
// ImageError, within the pixel limit's memory.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tensorcom/imaging/augmenter.h"

using namespace tensorcom::imaging;

namespace {

constexpr int kSize = 24;

ImageAugmenter& augmenter(bool validation) {
  auto make = [](bool val) {
    AugmentOptions options;
    options.validation = val;
    options.max_pixels = 1 << 22;  // well under the fuzzer's memory limit
    return ImageAugmenter(options, kSize);
  };
  static ImageAugmenter train = make(false), val = make(true);
  return validation ? val : train;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  std::uint64_t seed = 0;
  std::memcpy(&seed, data, sizeof seed);
  std::span<const std::byte> image(reinterpret_cast<const std::byte*>(data + 8), size - 8);
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> out(kSize * kSize * 3 + 1, 0xa5);
  try {
    augmenter(seed & 1).augment(image, rng, out.data());
  } catch (const ImageError&) {
  }
  if (out.back() != 0xa5) __builtin_trap();  // wrote past the image
  return 0;
}
