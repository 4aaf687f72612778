#include "tensorcom/imaging/sample_rng.h"

namespace tensorcom::imaging {

namespace {

// splitmix64's finaliser: a bijection of 64-bit numbers that spreads every
// input bit over the output.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EB;
  return x ^ (x >> 31);
}

}  // namespace

std::mt19937_64 sample_rng(std::uint64_t seed, std::uint64_t sequence) {
  return std::mt19937_64(mix64(mix64(seed) ^ sequence));
}

double uniform_float32(std::mt19937_64& rng, double low, double high) {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  return static_cast<float>(low + (high - low) * u);  // rounding keeps it within [float(low), float(high)]
}

}  // namespace tensorcom::imaging
