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
// cannot be served, nearest first: those read after it, then (at an epoch's
// end) those before it. Which they are depends only on the epoch's order and
// the samples' sizes, never on timing: replacements are deterministic.
struct Dispatched {
  SharedSample sample;
  std::vector<SharedSample> candidates;
};

// Up to kWindow consecutive samples of an epoch and at most `max_bytes` of
// them (but always the newest).
class SampleWindow {
 public:
  static constexpr std::size_t kWindow = 16;

  explicit SampleWindow(std::uint64_t max_bytes) : max_bytes_(max_bytes) {}
  void push(SharedSample sample) {
    bytes_ += buffered_bytes(*sample);
    samples_.push_back(std::move(sample));
  }
  // Whether it holds more than it may (the caller then pops the oldest).
  [[nodiscard]] bool over() const { return samples_.size() > kWindow || (samples_.size() > 1 && bytes_ > max_bytes_); }
  SharedSample pop() {
    SharedSample oldest = std::move(samples_.front());
    samples_.pop_front();
    bytes_ -= buffered_bytes(*oldest);
    return oldest;
  }
  void clear() {
    samples_.clear();
    bytes_ = 0;
  }
  [[nodiscard]] bool empty() const noexcept { return samples_.empty(); }
  [[nodiscard]] const std::deque<SharedSample>& samples() const noexcept { return samples_; }

 private:
  std::uint64_t max_bytes_;
  std::uint64_t bytes_ = 0;
  std::deque<SharedSample> samples_;
};

}  // namespace tensorcom::pipeline
