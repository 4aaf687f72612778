// The region decoder: a box at a DCT scale gives the pixels a decode of the
// whole image at that scale gives, with libjpeg's Huffman decoding or ours.
#include <doctest/doctest.h>

#include "jpeg_test_images.h"

using namespace tensorcom::imaging;
using namespace tensorcom::imaging::testing;

TEST_CASE("the region decoder gives a box's pixels as a decode of the whole image does") {
  // libjpeg-turbo's cropped decoding upsamples chroma at the strip's right
  // edge as at the image's: without columns to spare, a box's last pixels
  // came out differently.
  for (Layout l : kLayouts) {
    CAPTURE(l.components);
    CAPTURE(l.h);
    CAPTURE(l.v);
    const int width = 203, height = 157;
    const auto jpeg = encode(width, height, Encoding{l.components, l.h, l.v, 0, 0, false});
    std::mt19937 rng(11);
    for (int i = 0; i < 40; ++i) {
      const PixelBox box = random_box(rng, width, height);
      const int num = 8 >> (i % 4);
      CAPTURE(box.x);
      CAPTURE(box.y);
      CAPTURE(box.width);
      CAPTURE(box.height);
      CAPTURE(num);
      const std::vector<std::uint8_t> whole = whole_box(jpeg, box, num);
      CHECK(decode_box(jpeg, PixelBox{}, box, num) == whole);
      CHECK(decode_box(jpeg, PixelBox{}, box, num, Huffman::kOurs) == whole);  // the whole scan, one interval
    }
  }
}
