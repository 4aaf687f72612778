// What an image server counts as it serves (samples skipped, replaced, not
// replaceable, passed over on a resume; shard errors; JPEGs cut at restart
// markers; batches sent; time in each stage) and how it reports them: rate
// lines and the summary through its ServerLog, Prometheus metrics on a
// scrape. Every thread adds to it; thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "server_log.h"
#include "skip_counter.h"
#include "warning_gate.h"
#include "stage_clock.h"
#include "tensorcom/imaging/problem.h"
#include "tensorcom/metrics/metrics.h"
#include "tensorcom/metrics/sender_metrics.h"

namespace tensorcom {
class Connection;
}

namespace tensorcom::pipeline {

// How full the pipeline's queues are now, for a scrape.
struct QueueDepths {
  std::size_t decode = 0;  // encoded samples waiting for a worker
  std::size_t send = 0;    // complete batches waiting to be sent
};

class ServerCounters {
 public:
  // workers: decoding threads, each with its own clocks (worker_clocks(i)).
  ServerCounters(const ServerLog& log, std::size_t workers);

  // A sample not served, warned about at a bounded rate.
  SkipCounter& skips() noexcept { return skips_; }
  // A skipped sample whose place a neighbour filled, by why it was skipped.
  void count_replaced(imaging::Problem problem);
  // A slot that nothing could fill; `why` is warned at a bounded rate (a
  // folder of mostly bad files would otherwise print a line a sample).
  void count_unfilled(const std::string& why);
  // A sample not served: its batch was consumed before a resume.
  void count_replayed() noexcept { replayed_.fetch_add(1, std::memory_order_relaxed); }
  // A shard (or file) abandoned part way, and why.
  void count_shard_error(const std::string& problem);
  // JPEGs an augmenter decoded, and how many of them it cut at restart markers.
  void add_jpegs(std::uint64_t sliced, std::uint64_t total) noexcept;

  [[nodiscard]] metrics::SenderMetrics& sent() noexcept { return sent_; }
  [[nodiscard]] const metrics::SenderMetrics& sent() const noexcept { return sent_; }
  [[nodiscard]] StageClock& read_clock() noexcept { return read_clock_; }
  [[nodiscard]] WorkerClocks& worker_clocks(std::size_t worker) noexcept { return worker_clocks_[worker]; }

  [[nodiscard]] std::uint64_t replaced(imaging::Problem problem) const;
  [[nodiscard]] std::uint64_t unfilled() const noexcept { return unfilled_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t replayed() const noexcept { return replayed_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t shard_errors() const noexcept { return shard_errors_.load(std::memory_order_relaxed); }

  // The rate line: batches and images sent, the connection's rates, skipped.
  void report(const Connection& connection) const;
  // Where the counters' lines go: the server's log.
  [[nodiscard]] const ServerLog& log() const noexcept { return log_; }
  // The closing lines: what was served in `seconds`, skipped, replaced,
  // peers dropped, and a hint when restart markers would help.
  // The last line of a run. delivery: what became of the batches sent
  // (empty: nothing to say); complete false: some never reached a receiver.
  void summary(double seconds, const Connection& connection, const std::string& delivery = {},
               bool complete = true) const;
  // The server's metrics (the sender's, the stages', the counts, the queues).
  void write_metrics(metrics::MetricsText& out, const QueueDepths& queues) const;

 private:
  [[nodiscard]] std::string replaced_summary() const;
  [[nodiscard]] SkipCounter::Counts replaced_counts() const;

  const ServerLog& log_;
  SkipCounter skips_;
  mutable std::mutex replaced_mutex_;
  SkipCounter::Counts replaced_{};
  std::atomic<std::uint64_t> unfilled_{0};
  std::mutex unfilled_mutex_;
  WarningGate unfilled_gate_{std::chrono::seconds(1)};
  std::atomic<std::uint64_t> replayed_{0};
  std::atomic<std::uint64_t> shard_errors_{0};
  std::atomic<std::uint64_t> jpegs_sliced_{0};
  std::atomic<std::uint64_t> jpegs_total_{0};
  metrics::SenderMetrics sent_;  // batches and samples sent, time blocked sending
  StageClock read_clock_;        // the reader's time, less its waits for room in the queue
  std::size_t workers_;
  std::unique_ptr<WorkerClocks[]> worker_clocks_;  // one per worker
};

}  // namespace tensorcom::pipeline
