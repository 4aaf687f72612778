#include "sample_order.h"

#include <algorithm>
#include <numeric>

namespace tensorcom::pipeline {

std::mt19937_64 seeded_rng(std::initializer_list<std::uint64_t> parts) {
  std::vector<std::uint32_t> words;
  for (std::uint64_t p : parts) {
    words.push_back(static_cast<std::uint32_t>(p));
    words.push_back(static_cast<std::uint32_t>(p >> 32));
  }
  std::seed_seq seq(words.begin(), words.end());
  return std::mt19937_64(seq);
}

void fisher_yates(std::vector<std::size_t>& indices, std::mt19937_64& rng) {
  for (std::size_t i = indices.size(); i > 1; --i) {
    // rng() % i is biased by at most i / 2^64: negligible for shard counts.
    std::size_t j = static_cast<std::size_t>(rng() % i);
    std::swap(indices[i - 1], indices[j]);
  }
}

std::vector<std::size_t> epoch_units(std::size_t count, std::uint64_t epoch, const OrderOptions& o) {
  const std::size_t world = o.world ? o.world : 1;
  if (o.with_replacement) {
    auto rng = seeded_rng({o.seed, epoch, o.rank, 1});
    std::vector<std::size_t> drawn((count + world - 1) / world);
    for (auto& unit : drawn) unit = static_cast<std::size_t>(rng() % count);
    return drawn;
  }
  std::vector<std::size_t> all(count);
  std::iota(all.begin(), all.end(), 0);
  if (o.shuffle_units) {
    // Every rank shuffles alike, so that their shares never overlap.
    auto rng = seeded_rng({o.seed, epoch});
    fisher_yates(all, rng);
  }
  const std::size_t repeats = std::max<std::size_t>(o.repeats, 1);
  std::vector<std::size_t> mine;
  for (std::size_t i = o.rank; i < count * repeats; i += world) mine.push_back(all[i / repeats]);
  return mine;
}

}  // namespace tensorcom::pipeline
