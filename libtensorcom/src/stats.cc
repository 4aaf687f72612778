#include "tensorcom/stats.h"

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

std::string Statistics::summary() const {
  char line[160];
  std::snprintf(line, sizeof line, "rate %f msg/s throughput %.2e bytes/s samples %.1f/s", recent_batches_per_second(),
                recent_bytes_per_second(), recent_samples_per_second());
  return line;
}

}  // namespace tensorcom
