// Interleaved to planar pixels against the definition (plane k holds byte k
// of every pixel), for pixel counts around the vector path's 16-pixel steps.
#include "tensorcom/imaging/planar.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using namespace tensorcom::imaging;

TEST_CASE("interleaved_to_planar puts byte k of every pixel in plane k") {
  for (int channels : {1, 2, 3, 4}) {
    for (std::size_t count : {1u, 2u, 15u, 16u, 17u, 31u, 32u, 33u, 224u * 224u, 227u * 3u}) {
      CAPTURE(channels);
      CAPTURE(count);
      std::vector<std::uint8_t> pixels(count * channels);
      for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 7 + 3);
      // One guard byte past the end catches stores that overrun the last plane.
      std::vector<std::uint8_t> got(count * channels + 1, 0xAB);
      interleaved_to_planar(pixels.data(), count, channels, got.data());
      CHECK(got.back() == 0xAB);
      got.pop_back();
      std::vector<std::uint8_t> portable(got.size());
      interleaved_to_planar_portable(pixels.data(), count, channels, portable.data());
      CHECK(got == portable);
      for (int k = 0; k < channels; ++k) {
        for (std::size_t i = 0; i < count; ++i) REQUIRE(got[k * count + i] == pixels[i * channels + k]);
      }
    }
  }
}
