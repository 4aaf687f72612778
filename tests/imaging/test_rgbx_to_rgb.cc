// The RGBX-to-RGB step against the portable loop, on widths around the
// vector path's edges (4 pixels a step, stopping 16 bytes before a row's end).
#include "resample/rgbx_to_rgb.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using namespace tensorcom::imaging;

TEST_CASE("rgbx_to_rgb keeps R, G, B of each pixel, mirrored when asked") {
  for (int width : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 224, 227}) {
    const int height = 3;
    std::vector<std::uint8_t> rgbx(static_cast<std::size_t>(width) * height * 4);
    for (std::size_t i = 0; i < rgbx.size(); ++i) rgbx[i] = static_cast<std::uint8_t>(i * 7 + 3);
    for (bool flip : {false, true}) {
      CAPTURE(width);
      CAPTURE(flip);
      // One guard byte past the end catches stores that overrun the last row.
      std::vector<std::uint8_t> got(static_cast<std::size_t>(width) * height * 3 + 1, 0xAB);
      rgbx_to_rgb(rgbx.data(), width, height, flip, got.data());
      CHECK(got.back() == 0xAB);
      got.pop_back();
      std::vector<std::uint8_t> want(got.size());
      rgbx_to_rgb_portable(rgbx.data(), width, height, flip, want.data());
      CHECK(got == want);
      // And the portable loop itself, pixel by pixel.
      for (int r = 0; r < height; ++r) {
        for (int c = 0; c < width; ++c) {
          int source = flip ? width - 1 - c : c;
          for (int k = 0; k < 3; ++k) {
            REQUIRE(want[(static_cast<std::size_t>(r) * width + c) * 3 + k] ==
                    rgbx[(static_cast<std::size_t>(r) * width + source) * 4 + k]);
          }
        }
      }
    }
  }
}
