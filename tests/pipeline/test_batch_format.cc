#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "batch_format.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/codec/half.h"

using namespace tensorcom;
using namespace tensorcom::pipeline;

namespace {

// A size x size HWC image whose every byte says where it is: (p * 3 + c) % 251.
std::vector<std::uint8_t> numbered_image(int size) {
  std::vector<std::uint8_t> hwc(static_cast<std::size_t>(size) * size * 3);
  for (std::size_t i = 0; i < hwc.size(); ++i) hwc[i] = static_cast<std::uint8_t>(i % 251);
  return hwc;
}

}  // namespace

TEST_CASE("a format's dtype, sizes and shape") {
  BatchFormat f;
  f.size = 5;
  CHECK(f.dtype() == DType::kUInt8);
  CHECK(f.image_bytes() == 75);
  CHECK(f.direct());
  CHECK(f.image_shape(4) == Shape{4, 5, 5, 3});
  f.layout = ImageLayout::kBCHW;
  CHECK_FALSE(f.direct());
  CHECK(f.image_shape(4) == Shape{4, 3, 5, 5});
  f.pixels = PixelType::kFloat16;
  CHECK(f.dtype() == DType::kFloat16);
  CHECK(f.image_bytes() == 150);
  f.pixels = PixelType::kFloat32;
  CHECK(f.image_bytes() == 300);
}

TEST_CASE("uint8 images are copied, or transposed to CHW") {
  BatchFormat f;
  f.size = 3;
  const auto hwc = numbered_image(3);
  std::vector<std::byte> out(f.image_bytes());
  convert_image(f, hwc.data(), out.data());
  CHECK(std::memcmp(out.data(), hwc.data(), hwc.size()) == 0);
  f.layout = ImageLayout::kBCHW;
  convert_image(f, hwc.data(), out.data());
  const auto* chw = reinterpret_cast<const std::uint8_t*>(out.data());
  for (int c = 0; c < 3; ++c) {
    for (int p = 0; p < 9; ++p) CHECK(chw[c * 9 + p] == hwc[p * 3 + c]);
  }
}

TEST_CASE("float images are normalised per channel, in either layout") {
  BatchFormat f;
  f.size = 2;
  f.mean = {0.5f, 0.25f, 0.0f};
  f.std = {0.5f, 0.25f, 1.0f};
  const auto hwc = numbered_image(2);
  auto expected = [&](int p, int c) { return (hwc[p * 3 + c] / 255.0f - f.mean[c]) / f.std[c]; };
  SUBCASE("float32, HWC") {
    f.pixels = PixelType::kFloat32;
    std::vector<float> out(12);
    convert_image(f, hwc.data(), reinterpret_cast<std::byte*>(out.data()));
    for (int p = 0; p < 4; ++p) {
      for (int c = 0; c < 3; ++c) CHECK(out[p * 3 + c] == doctest::Approx(expected(p, c)).epsilon(1e-6));
    }
  }
  SUBCASE("float16, CHW") {
    f.pixels = PixelType::kFloat16;
    f.layout = ImageLayout::kBCHW;
    std::vector<std::uint16_t> out(12);
    convert_image(f, hwc.data(), reinterpret_cast<std::byte*>(out.data()));
    for (int p = 0; p < 4; ++p) {
      for (int c = 0; c < 3; ++c) CHECK(half_to_float(out[c * 4 + p]) == doctest::Approx(expected(p, c)).epsilon(1e-3));
    }
  }
  SUBCASE("a zero std is refused") {
    f.pixels = PixelType::kFloat32;
    f.std = {0.5f, 0.0f, 1.0f};
    std::vector<float> out(12);
    CHECK_THROWS_AS(convert_image(f, hwc.data(), reinterpret_cast<std::byte*>(out.data())), ArgumentError);
  }
}
