// IEEE half precision conversions (half.h).
#include "tensorcom/codec/half.h"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <ios>
#include <limits>

using namespace tensorcom;

namespace {

bool is_nan_half(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// The float halfway between two adjacent finite halves a < b (same sign).
float midpoint(std::uint16_t a, std::uint16_t b) {
  return static_cast<float>((static_cast<double>(half_to_float(a)) + half_to_float(b)) / 2);
}

}  // namespace

TEST_CASE("every half converts to float and back unchanged") {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const float value = half_to_float(half);
    CHECK_MESSAGE(std::isnan(value) == is_nan_half(half), "half 0x" << std::hex << h);
    REQUIRE_MESSAGE(float_to_half(value) == half, "half 0x" << std::hex << h);
  }
}

TEST_CASE("half values") {
  SUBCASE("exact values") {
    CHECK(half_to_float(0x3c00) == 1.0f);
    CHECK(half_to_float(0xc000) == -2.0f);
    CHECK(half_to_float(0x7bff) == 65504.0f);
    CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));  // the smallest subnormal
    CHECK(half_to_float(0x0400) == std::ldexp(1.0f, -14));  // the smallest normal
    CHECK(half_to_float(0x7c00) == std::numeric_limits<float>::infinity());
    CHECK(std::signbit(half_to_float(0x8000)));
  }
  SUBCASE("float to half rounds to nearest") {
    CHECK(float_to_half(1.0f) == 0x3c00);
    CHECK(float_to_half(-2.0f) == 0xc000);
    CHECK(float_to_half(0.1f) == 0x2e66);
    CHECK(float_to_half(1e-9f) == 0x0000);
    CHECK(float_to_half(-1e-9f) == 0x8000);
    CHECK(float_to_half(-0.0f) == 0x8000);
    CHECK(float_to_half(1.0009765625f) == 0x3c01);
    CHECK(float_to_half(std::nextafter(1.00048828125f, 2.0f)) == 0x3c01);  // just past halfway: up
  }
  SUBCASE("overflow and non-finite values") {
    CHECK(float_to_half(1e6f) == 0x7c00);
    CHECK(float_to_half(-1e6f) == 0xfc00);
    CHECK(float_to_half(65519.99f) == 0x7bff);
    CHECK(float_to_half(65520.0f) == 0x7c00);  // halfway to 2^16: to even, which is infinity
    CHECK(float_to_half(std::numeric_limits<float>::infinity()) == 0x7c00);
    CHECK(is_nan_half(float_to_half(std::nanf(""))));
    // A NaN whose payload lies below a half's mantissa is still a NaN.
    CHECK(is_nan_half(float_to_half(std::bit_cast<float>(0x7f800001u))));
  }
}

TEST_CASE("ties round to even") {
  SUBCASE("between normals") {
    CHECK(float_to_half(1.00048828125f) == 0x3c00);  // 1 + 2^-11: between 0x3c00 and 0x3c01
    CHECK(float_to_half(1.00146484375f) == 0x3c02);  // 1 + 3 * 2^-11: between 0x3c01 and 0x3c02
    CHECK(float_to_half(-1.00048828125f) == 0xbc00);
  }
  SUBCASE("between subnormals, and at zero") {
    CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);  // between 0 and the smallest subnormal
    CHECK(float_to_half(std::ldexp(3.0f, -25)) == 0x0002);  // between 0x0001 and 0x0002
    CHECK(float_to_half(std::ldexp(5.0f, -25)) == 0x0002);  // between 0x0002 and 0x0003
    CHECK(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  }
  SUBCASE("every tie between adjacent finite halves") {
    for (std::uint16_t a = 0; a < 0x7bff; ++a) {
      const auto b = static_cast<std::uint16_t>(a + 1);
      const std::uint16_t even = (a & 1u) == 0 ? a : b;
      REQUIRE_MESSAGE(float_to_half(midpoint(a, b)) == even, "between 0x" << std::hex << a << " and 0x" << b);
      REQUIRE(float_to_half(-midpoint(a, b)) == (even | 0x8000u));
    }
  }
}
