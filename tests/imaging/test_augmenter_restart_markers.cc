// The augmenter on files with restart markers: the same images as from the
// same pictures without them.
#include <doctest/doctest.h>

#include "jpeg_test_images.h"
#include "tensorcom/imaging/augmenter.h"

using namespace tensorcom::imaging;
using namespace tensorcom::imaging::testing;

TEST_CASE("the augmenter gives the same images from a file with restart markers as from one without") {
  // The same coefficients either way: restart markers change only how they are coded.
  auto plain = encode(320, 240, {3, 2, 2, 0, 0, false}, 3);
  auto restarts = encode(320, 240, {3, 2, 2, 1, 0, false}, 3);
  ImageAugmenter augmenter{AugmentOptions{}, 224};
  std::vector<std::uint8_t> a(224 * 224 * 3), b(224 * 224 * 3);
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng_a(seed), rng_b(seed);
    augmenter.augment(plain, rng_a, a.data());
    augmenter.augment(restarts, rng_b, b.data());
    CHECK(a == b);
  }
}
