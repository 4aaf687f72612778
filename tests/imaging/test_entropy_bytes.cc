// Walking entropy-coded bytes: the 0xFF positions a mask a block gives, and
// unstuffing with whole 16-byte steps against the byte-exact reference.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "jpeg/entropy_bytes.h"

using namespace tensorcom::imaging;

namespace {

// Bytes dense in what the walkers stop at: 0xFF then 00 (stuffed), FF
// (fill), a restart marker or another marker.
std::vector<std::uint8_t> scan_like(std::mt19937& rng, std::size_t size) {
  std::vector<std::uint8_t> bytes(size);
  for (auto& b : bytes) {
    const unsigned r = rng() % 16;
    b = r < 3 ? 0xFF : r == 3 ? 0x00 : r == 4 ? static_cast<std::uint8_t>(0xD0 + rng() % 8) : rng() % 256;
  }
  return bytes;
}

}  // namespace

TEST_CASE("for_each_ff visits every 0xFF in order, in blocks of 64 and the tail after them") {
  std::mt19937 rng(11);
  for (std::size_t size : {0, 1, 15, 63, 64, 65, 127, 128, 200, 1000}) {
    for (std::size_t begin : {std::size_t{0}, std::size_t{1}, std::size_t{37}}) {
      if (begin > size) continue;
      CAPTURE(size);
      CAPTURE(begin);
      const auto bytes = scan_like(rng, size);
      std::vector<std::size_t> expected, seen;
      for (std::size_t i = begin; i < size; ++i) {
        if (bytes[i] == 0xFF) expected.push_back(i);
      }
      CHECK(for_each_ff(bytes.data(), begin, size, [&](std::size_t p) {
        seen.push_back(p);
        return true;
      }));
      CHECK(seen == expected);
      if (expected.size() >= 3) {  // stopping early
        seen.clear();
        CHECK_FALSE(for_each_ff(bytes.data(), begin, size, [&](std::size_t p) {
          seen.push_back(p);
          return seen.size() < 3;
        }));
        CHECK(seen == std::vector<std::size_t>(expected.begin(), expected.begin() + 3));
      }
    }
  }
}

TEST_CASE("unstuff_wide gives unstuff's bytes and end for every kind of stop") {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::size_t size = 1 + rng() % 150;
    auto bytes = scan_like(rng, size + 16);  // room to read past the end
    if (trial % 2) {                         // only stuffed 0xFFs, so that most runs go on to the end
      for (std::size_t i = 0; i + 1 < size; ++i) {
        if (bytes[i] == 0xFF) bytes[++i] = 0x00;
      }
    }
    const std::size_t begin = rng() % size;
    std::vector<std::uint8_t> reference(size), wide(size + 16);
    const std::uint8_t* ref_end = unstuff(bytes.data() + begin, bytes.data() + size, reference.data());
    const std::uint8_t* wide_end = unstuff_wide(bytes.data() + begin, bytes.data() + size, wide.data());
    const auto count = static_cast<std::size_t>(ref_end - reference.data());
    CAPTURE(trial);
    REQUIRE(static_cast<std::size_t>(wide_end - wide.data()) == count);
    CHECK(std::vector<std::uint8_t>(wide.begin(), wide.begin() + static_cast<std::ptrdiff_t>(count)) ==
          std::vector<std::uint8_t>(reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(count)));
  }
}
