// augment-alone [--decode-only] [--passes N] [--interpolation fast|bilinear|bicubic] SHARD.tar...:
// the server's per-image work on
// the calling thread, without reading, batching or sending: every JPEG of the
// shards, in memory, goes through ImageAugmenter as serve-imagenet-shards
// would (RandomResizedCrop drawn from the header, region decoding at the DCT
// scale, resize to 224 and flip). Prints one JSON line with images/s.
//
// --passes N times every chunk of 50 images N times and keeps each chunk's
// best: steadier figures on a shared machine.
//
// --decode-only stops after decoding the crop box (no resize): what
// libjpeg-turbo's region decoding alone costs for the server's crops, and so
// the most any server built on it could reach.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tensorcom/imaging/augmenter.h"
#include "load_jpegs.h"
#include "tensorcom/imaging/sample_rng.h"

using namespace tensorcom::imaging;

int main(int argc, char** argv) {
  bool decode_only = false;
  int passes = 1;
  int size = 224;
  AugmentOptions options;
  int first = 1;
  for (; first < argc && argv[first][0] == '-'; ++first) {
    if (std::strcmp(argv[first], "--decode-only") == 0) {
      decode_only = true;
    } else if (std::strcmp(argv[first], "--passes") == 0 && first + 1 < argc) {
      passes = std::max(1, std::atoi(argv[++first]));
    } else if (std::strcmp(argv[first], "--size") == 0 && first + 1 < argc) {
      size = std::atoi(argv[++first]);
      if (size < 1 || size > 4096) {
        std::fprintf(stderr, "augment-alone: --size takes 1 to 4096\n");
        return 2;
      }
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
    std::fprintf(stderr,
                 "usage: augment-alone [--decode-only] [--passes N] [--size N] [--interpolation I] SHARD.tar... (no "
                 "JPEGs found)\n");
    return 1;
  }
  ImageAugmenter augmenter(options, size);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(augmenter.output().width) * augmenter.output().height * 3);
  std::size_t failures = 0;
  // Each pass times the images in chunks; a chunk's time is its best over
  // the passes: on a shared machine, what other tenants take lands in some
  // passes' chunks, rarely in all of them.
  constexpr std::size_t kChunk = 50;
  std::vector<double> best((jpegs.size() + kChunk - 1) / kChunk, 1e300);
  for (int pass = 0; pass < passes; ++pass) {
    failures = 0;
    for (std::size_t c = 0; c < best.size(); ++c) {
      const auto start = std::chrono::steady_clock::now();
      for (std::size_t i = c * kChunk; i < std::min(jpegs.size(), (c + 1) * kChunk); ++i) {
        auto rng = sample_rng(0, i);  // as the server seeds sample i
        try {
          if (decode_only) {
            bool flip = false;
            (void)augmenter.decode_jpeg_crop(jpegs[i], rng, &flip);
          } else {
            augmenter.augment(jpegs[i], rng, out.data());
          }
        } catch (const ImageError&) {
          ++failures;
        }
      }
      best[c] = std::min(best[c], std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  double seconds = 0;
  for (double t : best) seconds += t;
  std::printf("{\"images\":%zu,\"failures\":%zu,\"seconds\":%.4f,\"images_per_s\":%.1f}\n", jpegs.size(), failures,
              seconds, jpegs.size() / seconds);
  return 0;
}
