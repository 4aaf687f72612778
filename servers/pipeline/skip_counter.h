// Counts samples that were skipped, by reason, and warns about them through
// the server's log at a bounded rate, naming the sample and its shard.
// Thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "server_log.h"
#include "warning_gate.h"
#include "tensorcom/imaging/problem.h"

namespace tensorcom::pipeline {

class SkipCounter {
 public:
  // Warnings go to log.warn(); log must outlive the counter.
  explicit SkipCounter(const ServerLog& log, std::chrono::milliseconds warning_interval = std::chrono::seconds(1));

  // Counts one skipped sample; warns unless a warning was printed within the
  // interval (the count still grows).
  void skip(imaging::Problem problem, const std::string& key, const std::string& shard, const std::string& detail);

  // Per problem, every one of imaging::kAllProblems (0 for those not seen).
  using Counts = std::array<std::uint64_t, imaging::kAllProblems.size()>;
  [[nodiscard]] Counts counts() const;
  [[nodiscard]] std::uint64_t count(imaging::Problem problem) const;
  [[nodiscard]] std::uint64_t total() const;
  // "none" or "undecodable 3, missing label 1".
  [[nodiscard]] std::string summary() const;

 private:
  const ServerLog& log_;
  mutable std::mutex mutex_;
  Counts counts_{};
  WarningGate gate_;
};

}  // namespace tensorcom::pipeline
