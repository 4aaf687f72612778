// The random generator of one sample's transform (its crop and flip), from
// the run's seed and the sample's number: the servers and the Python
// transforms draw the same crops for the same (seed, sequence).
#pragma once

#include <cstdint>
#include <random>

namespace tensorcom::imaging {

// Seeded from one 64-bit mix of the two numbers (splitmix64's finaliser,
// a bijection): distinct for every sequence under one seed. A seed_seq
// would spread the words over the generator's whole state, at several
// times the cost per image.
[[nodiscard]] std::mt19937_64 sample_rng(std::uint64_t seed, std::uint64_t sequence);

// A draw as torch.empty(1).uniform_(low, high).item() gives it: uniform in
// [low, high], held as a float32 value.
[[nodiscard]] double uniform_float32(std::mt19937_64& rng, double low, double high);

}  // namespace tensorcom::imaging
