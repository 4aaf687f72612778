// jpeg-decode-baseline [--entropy-only] SHARD.tar...: decodes every JPEG of
// the shards at full size to RGB with TurboJPEG on the calling thread, and
// prints one JSON line with images/s. The reference point of the
// augmentation benchmark: what a server would manage if it decoded every
// pixel.
//
// --entropy-only stops after Huffman decoding (jpeg_read_coefficients): no
// inverse DCT, upsampling or colour conversion. A region decoder must still
// entropy-decode every row above the bottom of its crop, so this figure
// bounds what any server built on libjpeg-turbo can reach.
#include <turbojpeg.h>

// jpeglib.h needs FILE and size_t declared first.
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "load_jpegs.h"

namespace {

// Full decode to RGB, as an application that wants every pixel would.
bool decode_full(tjhandle tj, const std::vector<unsigned char>& jpeg, std::vector<unsigned char>& rgb,
                 std::size_t& pixels) {
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, jpeg.data(), jpeg.size(), &width, &height, &subsampling, &colorspace) != 0) return false;
  rgb.resize(static_cast<std::size_t>(width) * height * 3);
  pixels += static_cast<std::size_t>(width) * height;
  return tjDecompress2(tj, jpeg.data(), jpeg.size(), rgb.data(), width, 0, height, TJPF_RGB, 0) == 0;
}

// Huffman decoding of the whole image into DCT coefficients, nothing more.
// The default error manager exits on corrupt data; the bench shards are good.
void decode_entropy(const std::vector<unsigned char>& jpeg, std::size_t& pixels) {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&cinfo, TRUE);
  pixels += static_cast<std::size_t>(cinfo.image_width) * cinfo.image_height;
  jpeg_read_coefficients(&cinfo);
  jpeg_destroy_decompress(&cinfo);
}

}  // namespace

int main(int argc, char** argv) {
  const bool entropy_only = argc > 1 && std::strcmp(argv[1], "--entropy-only") == 0;
  auto jpegs = bench::load_jpegs<unsigned char>("jpeg-decode-baseline", entropy_only ? 2 : 1, argc, argv);
  if (jpegs.empty()) {
    std::fprintf(stderr, "usage: jpeg-decode-baseline [--entropy-only] SHARD.tar... (no JPEGs found)\n");
    return 1;
  }
  std::unique_ptr<void, int (*)(tjhandle)> tj(tjInitDecompress(), tjDestroy);
  std::vector<unsigned char> rgb;
  std::size_t pixels = 0, failures = 0;
  auto start = std::chrono::steady_clock::now();
  for (const auto& jpeg : jpegs) {
    if (entropy_only) {
      decode_entropy(jpeg, pixels);
    } else if (!decode_full(tj.get(), jpeg, rgb, pixels)) {
      ++failures;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"images\":%zu,\"failures\":%zu,\"seconds\":%.4f,\"images_per_s\":%.1f,\"mpixels_per_s\":%.1f}\n",
              jpegs.size(), failures, seconds, jpegs.size() / seconds, pixels / seconds / 1e6);
  return 0;
}
