// Reading dimensions from image headers, against what OpenCV writes for each
// format and hand-made headers for the variants it does not write.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tensorcom/imaging/format.h"
#include "opencv_encode.h"

using namespace tensorcom::imaging;
using testing::encode;

namespace {

std::vector<std::byte> bytes_of(const std::string& text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

}  // namespace

TEST_CASE("dimensions of what OpenCV writes") {
  const cv::Mat colour(23, 37, CV_8UC3, cv::Scalar(10, 200, 90));  // 37 wide, 23 high
  const cv::Mat grey(23, 37, CV_8UC1, cv::Scalar(77));
  const ImageSize expected{37, 23};
  CHECK(peek_image_size(encode(colour, ".png")) == expected);
  CHECK(peek_image_size(encode(grey, ".png")) == expected);
  CHECK(peek_image_size(encode(colour, ".ppm")) == expected);
  CHECK(peek_image_size(encode(colour, ".ppm", {cv::IMWRITE_PXM_BINARY, 0})) == expected);  // P3, ASCII
  CHECK(peek_image_size(encode(grey, ".pgm")) == expected);
  CHECK(peek_image_size(encode(grey, ".pbm")) == expected);
  CHECK(peek_image_size(encode(colour, ".bmp")) == expected);
  if (cv::haveImageWriter(".webp")) {
    CHECK(peek_image_size(encode(colour, ".webp", {cv::IMWRITE_WEBP_QUALITY, 80})) == expected);   // lossy
    CHECK(peek_image_size(encode(colour, ".webp", {cv::IMWRITE_WEBP_QUALITY, 101})) == expected);  // lossless
  }
}

TEST_CASE("hand-made headers") {
  SUBCASE("PNM comments and spacing") {
    CHECK(peek_image_size(bytes_of("P6\n# made by hand\n  640\t# width\n480\n255\n")) == ImageSize{640, 480});
  }
  SUBCASE("a BMP stored top-down has a negative height") {
    std::string bmp = "BM" + std::string(12, '\0');
    bmp += std::string("\x28\0\0\0", 4);        // 40-byte info header
    bmp += std::string("\x40\x1f\0\0", 4);      // width 8000
    bmp += std::string("\x9c\xff\xff\xff", 4);  // height -100
    CHECK(peek_image_size(bytes_of(bmp)) == ImageSize{8000, 100});
  }
  SUBCASE("an animated WebP declares its canvas") {
    std::string webp = "RIFF" + std::string("\x64\0\0\0", 4) + "WEBPVP8X" + std::string("\x0a\0\0\0", 4);
    webp += std::string("\x02\0\0\0", 4);    // flags: animation
    webp += std::string("\x9f\x86\x01", 3);  // width - 1 = 99999
    webp += std::string("\x0f\x27\0", 3);    // height - 1 = 9999
    webp += "ANIM";
    CHECK(peek_image_size(bytes_of(webp)) == ImageSize{100000, 10000});
  }
  SUBCASE("a PNG that claims a hundred thousand pixels square") {
    std::string png = "\x89PNG\r\n\x1a\n" + std::string("\0\0\0\x0dIHDR", 8);
    png += std::string("\0\x01\x86\xa0\0\x01\x86\xa0", 8);
    CHECK(peek_image_size(bytes_of(png)) == ImageSize{100000, 100000});
  }
}

TEST_CASE("unknown or cut-short headers tell nothing") {
  CHECK_FALSE(peek_image_size({}));
  CHECK_FALSE(peek_image_size(bytes_of("\x89PNG\r\n\x1a\n")));
  CHECK_FALSE(peek_image_size(bytes_of("P6\n640")));
  CHECK_FALSE(peek_image_size(bytes_of("P6 # a comment that never ends")));
  CHECK_FALSE(peek_image_size(bytes_of("BM short")));
  CHECK_FALSE(peek_image_size(bytes_of("GIF89a\x10\0\x10\0")));
  CHECK_FALSE(
      peek_image_size(bytes_of("P6#no space after the magic number\n4 4\n255\n")));  // OpenCV would not claim it
  CHECK_FALSE(peek_image_size(
      bytes_of(std::string("RIFF\x64\0\0\0WEBPVP8 ", 16) + std::string(20, '\xff'))));  // libwebp says no
  CHECK_FALSE(peek_image_size(bytes_of(std::string("\xff\xd8\xff\xe0", 4))));  // JPEG: its own decoder reads it
}
