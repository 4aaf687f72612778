// Lets at most one warning through an interval and counts the ones it
// holds back, so that a stream of bad samples costs a line a second, each
// saying how many went unsaid. Not thread-safe: its owner locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace tensorcom::pipeline {

class WarningGate {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WarningGate(std::chrono::milliseconds interval) : interval_(interval) {}

  // Nothing if this warning is held back; else how many were held back
  // since the last one let through.
  std::optional<std::uint64_t> pass(Clock::time_point now) {
    if (last_ != Clock::time_point{} && now - last_ < interval_) {
      ++held_back_;
      return std::nullopt;
    }
    last_ = now;
    const std::uint64_t held = held_back_;
    held_back_ = 0;
    return held;
  }

 private:
  std::chrono::milliseconds interval_;
  Clock::time_point last_{};
  std::uint64_t held_back_ = 0;
};

}  // namespace tensorcom::pipeline
