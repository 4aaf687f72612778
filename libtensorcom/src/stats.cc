#include "tensorcom/transport/stats.h"

#include <cstdio>

namespace tensorcom {

void Statistics::add(std::uint64_t samples, std::uint64_t bytes, Clock::time_point now) {
  if (batches_ == 0) first_ = now;
  last_ = now;
  ++batches_;
  samples_ += samples;
  bytes_ += bytes;
  recent_.push_back({now, samples, bytes});
  recent_samples_ += samples;
  recent_bytes_ += bytes;
  if (recent_.size() > horizon_) {
    recent_samples_ -= recent_.front().samples;
    recent_bytes_ -= recent_.front().bytes;
    recent_.pop_front();
  }
}

void Statistics::reset(Clock::time_point now) { *this = Statistics(horizon_, now); }

double Statistics::seconds() const noexcept { return std::chrono::duration<double>(last_ - first_).count(); }

double Statistics::recent_span() const noexcept {
  if (recent_.size() < 2) return 0;
  return std::chrono::duration<double>(recent_.back().time - recent_.front().time).count();
}

// Over n entries there are n-1 intervals: the first entry's batch arrived
// before the span began, so it is not counted in the rate.
double Statistics::recent_batches_per_second() const noexcept {
  double span = recent_span();
  return span > 0 ? static_cast<double>(recent_.size() - 1) / span : 0;
}

double Statistics::recent_samples_per_second() const noexcept {
  double span = recent_span();
  return span > 0 ? static_cast<double>(recent_samples_ - recent_.front().samples) / span : 0;
}

double Statistics::recent_bytes_per_second() const noexcept {
  double span = recent_span();
  return span > 0 ? static_cast<double>(recent_bytes_ - recent_.front().bytes) / span : 0;
}

namespace {

// The shortest span summary() computes a rate over. Batches that queued up
// (a sender's first batches, made before anyone received them, or what a
// receiver finds waiting) pass in microseconds: over a shorter span they
// would read as hundreds of thousands a second. Over half a second, k queued
// batches add at most 2k a second.
constexpr double kShortestRateSpan = 0.5;

struct Rates {
  double batches = 0;
  double bytes = 0;
  double samples = 0;
};

}  // namespace

std::string Statistics::summary() const {
  Rates r;
  const double since_start = std::chrono::duration<double>(last() - started_).count();
  if (recent_span() >= kShortestRateSpan) {
    r = {recent_batches_per_second(), recent_bytes_per_second(), recent_samples_per_second()};
  } else if (since_start >= kShortestRateSpan) {
    // The recent batches came too close together: every batch since the
    // start instead, as the reference's rate() counts them.
    r = {static_cast<double>(batches_) / since_start, static_cast<double>(bytes_) / since_start,
         static_cast<double>(samples_) / since_start};
  }  // else too early to tell: zeros, as before the second batch
  char line[160];
  std::snprintf(line, sizeof line, "rate %f msg/s throughput %.2e bytes/s samples %.1f/s", r.batches, r.bytes,
                r.samples);
  return line;
}

}  // namespace tensorcom
