// augment-alone [--decode-only] [--interpolation fast|bilinear|bicubic] SHARD.tar...:
// the server's per-image work on
// the calling thread, without reading, batching or sending: every JPEG of the
// shards, in memory, goes through ImageAugmenter as serve-imagenet-shards
// would (RandomResizedCrop drawn from the header, region decoding at the DCT
// scale, resize to 224 and flip). Prints one JSON line with images/s.
//
// --decode-only stops after decoding the crop box (no resize): what
// libjpeg-turbo's region decoding alone costs for the server's crops, and so
// the most any server built on it could reach.

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "image_augmenter.h"
#include "load_jpegs.h"
#include "sample_order.h"

using namespace tensorcom::pipeline;

int main(int argc, char** argv) {
  bool decode_only = false;
  AugmentOptions options;
  int first = 1;
  for (; first < argc && argv[first][0] == '-'; ++first) {
    if (std::strcmp(argv[first], "--decode-only") == 0) {
      decode_only = true;
    } else if (std::strcmp(argv[first], "--interpolation") == 0 && first + 1 < argc) {
      const auto resample = parse_resample(argv[++first]);
      if (!resample) {
        std::fprintf(stderr, "augment-alone: --interpolation takes bilinear, bicubic or fast\n");
        return 2;
      }
      options.resample = *resample;
    }
  }
  auto jpegs = bench::load_jpegs<std::byte>("augment-alone", first, argc, argv);
  if (jpegs.empty()) {
    std::fprintf(stderr, "usage: augment-alone [--decode-only] SHARD.tar... (no JPEGs found)\n");
    return 1;
  }
  ImageAugmenter augmenter(options, 224);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(augmenter.size()) * augmenter.size() * 3);
  std::size_t failures = 0;
  auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < jpegs.size(); ++i) {
    auto rng = seeded_rng({0, i, 2});  // as the server seeds sample i
    try {
      if (decode_only) {
        bool flip = false;
        (void)augmenter.decode_jpeg_crop(jpegs[i], rng, &flip);
      } else {
        augmenter.augment(jpegs[i], rng, out.data());
      }
    } catch (const SampleError&) {
      ++failures;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"images\":%zu,\"failures\":%zu,\"seconds\":%.4f,\"images_per_s\":%.1f}\n", jpegs.size(), failures,
              seconds, jpegs.size() / seconds);
  return 0;
}
