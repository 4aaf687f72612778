// The order samples are served in: per epoch, the shard (or file) order is
// shuffled from the seed and the epoch number, split between servers by
// rank, or drawn with replacement; then a shuffle buffer mixes samples across
// shards. Every sample is served exactly once per epoch (per server) unless
// resampling. Deterministic: own Fisher-Yates over mt19937_64, whose output
// the C++ standard fixes (std::shuffle's is not).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <vector>

#include "tensorcom/imaging/sample_rng.h"

namespace tensorcom::pipeline {

struct OrderOptions {
  std::uint64_t seed = 0;
  bool shuffle_units = true;      // shuffle shard/file order each epoch
  std::size_t rank = 0;           // this server's share of the units ...
  std::size_t world = 1;          // ... among this many servers
  bool with_replacement = false;  // draw units with replacement instead
  // Repeated augmentation (torchvision's RASampler, timm's
  // RepeatAugSampler): each unit listed this many times in a row before the
  // list is dealt to the ranks, so that its repeats go to as many ranks.
  std::size_t repeats = 1;
};

// A generator seeded from several numbers (seed, epoch, ...).
[[nodiscard]] std::mt19937_64 seeded_rng(std::initializer_list<std::uint64_t> parts);

// Sample `sequence`'s generator (its crop and flip), as every augmenter
// draws it.
using imaging::sample_rng;

// Shuffles indices in place with rng.
void fisher_yates(std::vector<std::size_t>& indices, std::mt19937_64& rng);

// The units (indices into a list of count shards or files) of one epoch.
[[nodiscard]] std::vector<std::size_t> epoch_units(std::size_t count, std::uint64_t epoch, const OrderOptions& options);

// How many samples one epoch of a server takes: its whole share (quota 0),
// or exactly `quota`, so that every server, and so every trainer rank, sends
// the same number of batches (DDP ranks that disagree hang). A larger share
// is cut (the rest is dropped this epoch, as DistributedSampler's drop_last
// does); a smaller one is read again from its start until the quota is met
// (its first samples repeated, as DistributedSampler pads).
class EpochQuota {
 public:
  explicit EpochQuota(std::uint64_t quota) noexcept : quota_(quota) {}
  // Counts one more sample; false (and nothing counted) once the quota is met.
  [[nodiscard]] bool take() noexcept {
    if (full()) {
      cut_ = true;
      return false;
    }
    ++taken_;
    return true;
  }
  [[nodiscard]] bool full() const noexcept { return quota_ != 0 && taken_ == quota_; }
  // After a pass over the share that began with `taken_before` taken: true
  // when the share must be read again. A pass that took nothing cannot
  // help: the share is empty, and the caller reports it.
  [[nodiscard]] bool another_pass(std::uint64_t taken_before) const noexcept {
    return quota_ != 0 && taken_ < quota_ && taken_ > taken_before;
  }
  [[nodiscard]] std::uint64_t taken() const noexcept { return taken_; }
  // Whether a sample was refused: the share held more than the quota.
  [[nodiscard]] bool cut() const noexcept { return cut_; }

 private:
  std::uint64_t quota_;
  std::uint64_t taken_ = 0;
  bool cut_ = false;
};

// webdataset's shuffle buffer: holds up to capacity samples and releases a
// random one for each one added once full; drain() empties it at random.
template <class T>
class ShuffleBuffer {
 public:
  using Weigh = std::function<std::size_t(const T&)>;

  // Holds up to `capacity` items and, when max_bytes > 0, up to max_bytes
  // (as weigh counts them): shuffling must not cost unbounded memory when
  // samples are large.
  ShuffleBuffer(std::size_t capacity, std::mt19937_64 rng, std::size_t max_bytes = 0, Weigh weigh = {})
      : capacity_(capacity), rng_(rng), max_bytes_(max_bytes), weigh_(std::move(weigh)) {}

  // Adds value; returns a sample to pass on, if one is due by count.
  std::optional<T> add(T value) {
    if (capacity_ == 0) return value;
    bytes_ += weight(value);
    items_.push_back(std::move(value));
    if (items_.size() <= capacity_) return std::nullopt;
    return take_random();
  }
  // A random sample while the buffer holds more than max_bytes; call it
  // after add() until it returns nothing.
  std::optional<T> take_excess() {
    if (!max_bytes_ || bytes_ <= max_bytes_ || items_.empty()) return std::nullopt;
    return take_random();
  }
  // Removes a random remaining sample; nothing when empty.
  std::optional<T> drain() {
    if (items_.empty()) return std::nullopt;
    return take_random();
  }

 private:
  std::size_t weight(const T& value) const { return weigh_ ? weigh_(value) : 0; }

  T take_random() {
    std::size_t i = std::uniform_int_distribution<std::size_t>(0, items_.size() - 1)(rng_);
    std::swap(items_[i], items_.back());
    T value = std::move(items_.back());
    items_.pop_back();
    bytes_ -= weight(value);
    return value;
  }

  std::size_t capacity_;
  std::mt19937_64 rng_;
  std::size_t max_bytes_;
  Weigh weigh_;
  std::size_t bytes_ = 0;
  std::vector<T> items_;
};

}  // namespace tensorcom::pipeline
