// The samples around the one being handed to a worker, that may stand in
// for it: the image server holds back the samples read after it (so that
// they are read before it is decoded) and keeps the last ones handed over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "raw_sample.h"

namespace tensorcom::pipeline {

using SharedSample = std::shared_ptr<const RawSample>;

// A sample handed to a worker, with the samples that may replace it if it
// cannot be served, nearest first: those read after it, then those before
// it (only samples that may be served: may_be_servable). Which they are depends only on the epoch's order and
// the samples' sizes, never on timing: replacements are deterministic.
struct Dispatched {
  SharedSample sample;
  std::vector<SharedSample> candidates;
};

// Consecutive samples of an epoch: up to kWindow that may be served
// (may_be_servable) with the ones between them that may not, at most
// kMostHeld in all and `max_bytes` of them (but always the newest). Samples
// that cannot be served weigh almost nothing: a run of them (a folder of
// failed downloads) widens the window until it holds samples that can.
class SampleWindow {
 public:
  static constexpr std::size_t kWindow = 16;
  static constexpr std::size_t kMostHeld = std::size_t{1} << 16;

  explicit SampleWindow(std::uint64_t max_bytes) : max_bytes_(max_bytes) {}
  void push(SharedSample sample) {
    bytes_ += buffered_bytes(*sample);
    if (may_be_servable(*sample)) ++servable_;
    samples_.push_back(std::move(sample));
  }
  // Whether it holds more than it may (the caller then pops the oldest).
  [[nodiscard]] bool over() const {
    return servable_ > kWindow || samples_.size() > kMostHeld || (samples_.size() > 1 && bytes_ > max_bytes_);
  }
  SharedSample pop() {
    SharedSample oldest = std::move(samples_.front());
    samples_.pop_front();
    bytes_ -= buffered_bytes(*oldest);
    if (may_be_servable(*oldest)) --servable_;
    return oldest;
  }
  void clear() {
    samples_.clear();
    bytes_ = 0;
    servable_ = 0;
  }
  [[nodiscard]] bool empty() const noexcept { return samples_.empty(); }
  [[nodiscard]] const std::deque<SharedSample>& samples() const noexcept { return samples_; }

 private:
  std::uint64_t max_bytes_;
  std::uint64_t bytes_ = 0;
  std::size_t servable_ = 0;
  std::deque<SharedSample> samples_;
};

}  // namespace tensorcom::pipeline
