#include "skip_counter.h"

#include "tensorcom/formats/printable.h"

namespace tensorcom::pipeline {

SkipCounter::SkipCounter(const ServerLog& log, std::chrono::milliseconds warning_interval)
    : log_(log), gate_(warning_interval) {}

void SkipCounter::skip(imaging::Problem problem, const std::string& key, const std::string& shard,
                       const std::string& detail) {
  std::lock_guard lock(mutex_);
  ++counts_[static_cast<std::size_t>(problem)];
  const std::optional<std::uint64_t> unreported = gate_.pass(WarningGate::Clock::now());
  if (!unreported) return;
  std::string line = "skipped sample '" + formats::printable(key) + "' of " + formats::printable(shard) + ": " +
                     std::string(imaging::problem_name(problem));
  if (!detail.empty()) line += " (" + formats::printable(detail) + ")";
  if (*unreported) line += "; " + std::to_string(*unreported) + " more skipped since the last warning";
  log_.warn(line);
}

SkipCounter::Counts SkipCounter::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::uint64_t SkipCounter::count(imaging::Problem problem) const {
  std::lock_guard lock(mutex_);
  return counts_[static_cast<std::size_t>(problem)];
}

std::uint64_t SkipCounter::total() const {
  std::lock_guard lock(mutex_);
  std::uint64_t sum = 0;
  for (const std::uint64_t count : counts_) sum += count;
  return sum;
}

std::string SkipCounter::summary() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const imaging::Problem problem : imaging::kAllProblems) {
    const std::uint64_t count = counts_[static_cast<std::size_t>(problem)];
    if (count == 0) continue;
    out += (out.empty() ? "" : ", ") + std::string(imaging::problem_name(problem)) + " " + std::to_string(count);
  }
  return out.empty() ? "none" : out;
}

}  // namespace tensorcom::pipeline
