#include "server_counters.h"

#include <sys/resource.h>

#include <sstream>

#include "tensorcom/formats/printable.h"
#include "tensorcom/transport/connection.h"
#include "tensorcom/transport/connection_controls.h"

namespace tensorcom::pipeline {

namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

// The process's peak resident memory so far.
std::uint64_t peak_memory_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) / 1024;  // kilobytes on Linux
}

}  // namespace

ServerCounters::ServerCounters(const ServerLog& log, std::size_t workers)
    : log_(log), skips_(log), workers_(workers), worker_clocks_(std::make_unique<WorkerClocks[]>(workers)) {}

void ServerCounters::count_replaced(imaging::Problem problem) {
  std::lock_guard lock(replaced_mutex_);
  ++replaced_[static_cast<std::size_t>(problem)];
}

void ServerCounters::count_shard_error(const std::string& problem) {
  shard_errors_.fetch_add(1, kRelaxed);
  log_.warn(formats::printable(problem));
}

void ServerCounters::add_jpegs(std::uint64_t sliced, std::uint64_t total) noexcept {
  jpegs_sliced_.fetch_add(sliced, kRelaxed);
  jpegs_total_.fetch_add(total, kRelaxed);
}

void ServerCounters::count_unfilled(const std::string& why) {
  unfilled_.fetch_add(1, std::memory_order_relaxed);
  std::optional<std::uint64_t> held_back;
  {
    std::lock_guard lock(unfilled_mutex_);
    held_back = unfilled_gate_.pass(WarningGate::Clock::now());
  }
  if (!held_back) return;
  log_.warn(why + (*held_back ? "; " + std::to_string(*held_back) + " more sent short since the last warning" : ""));
}

SkipCounter::Counts ServerCounters::replaced_counts() const {
  std::lock_guard lock(replaced_mutex_);
  return replaced_;
}

std::uint64_t ServerCounters::replaced(imaging::Problem problem) const {
  return replaced_counts()[static_cast<std::size_t>(problem)];
}

void ServerCounters::report(const Connection& connection) const {
  log_.info(std::to_string(sent_.batches()) + " batches, " + std::to_string(sent_.samples()) + " images; " +
            connection.stats().summary() + "; skipped " + std::to_string(skips_.total()));
}

std::string ServerCounters::replaced_summary() const {
  std::string out;
  std::uint64_t total = 0;
  const SkipCounter::Counts replaced = replaced_counts();
  for (const imaging::Problem problem : imaging::kAllProblems) {
    const std::uint64_t n = replaced[static_cast<std::size_t>(problem)];
    if (n == 0) continue;
    total += n;
    out += (out.empty() ? "" : ", ") + std::string(imaging::problem_name(problem)) + " " + std::to_string(n);
  }
  out = std::to_string(total) + (out.empty() ? "" : " (" + out + ")");
  if (unfilled()) out += ", not replaceable " + std::to_string(unfilled());
  if (replayed()) out += "; passed over (consumed before the resume): " + std::to_string(replayed());
  return out;
}

void ServerCounters::summary(double seconds, const Connection& connection, const std::string& delivery,
                             bool complete) const {
  const std::uint64_t samples = sent_.samples();
  const std::uint64_t sliced = jpegs_sliced_.load(kRelaxed), jpegs = jpegs_total_.load(kRelaxed);
  std::ostringstream line;
  line << (complete ? "done: served " : "incomplete: sent ") << samples << " samples in " << sent_.batches()
       << " batches in " << seconds << " s (" << (seconds > 0 ? static_cast<double>(samples) / seconds : 0.0)
       << " images/s); skipped: " << skips_.summary() << "; shard errors: " << shard_errors()
       << "; replaced by a neighbour: " << replaced_summary() << "; JPEGs cut at restart markers: " << sliced << " of "
       << jpegs << "; peak memory: " << peak_memory_mib() << " MiB";
  if (!delivery.empty()) line << "; delivery: " << delivery;
  log_.info(line.str());
  const DroppedPeers dropped = dropped_peers(connection);
  if (dropped.unfinished || dropped.flooding || dropped.over_limit) {
    log_.info("peers dropped: " + std::to_string(dropped.unfinished) + " that did not finish their handshake, " +
              std::to_string(dropped.flooding) +
              " that sent more than a receiver needs to (their addresses then refused a while: " +
              std::to_string(dropped.refused_after_flooding) + " reconnections), " +
              std::to_string(dropped.over_limit) +
              " that came while the data port held its most peers (docs/security.md)");
  }
  // Most of a crop's decoding time is entropy decoding of rows it does not
  // need; restart markers let the server skip it. Say how to get them.
  if (jpegs > 0 && sliced * 2 < jpegs) {
    log_.info(
        "hint: most JPEGs had no restart markers to cut crops at; 'make-shards --from-shards PATTERN "
        "--restart-markers' rewrites shards losslessly so that crops decode faster");
  }
}

// On the metrics server's thread: reads atomics, and takes the skip and
// replacement counters' locks briefly.
void ServerCounters::write_metrics(metrics::MetricsText& out, const QueueDepths& queues) const {
  StageClock::Clock::rep decode = 0, augment = 0;
  for (std::size_t i = 0; i < workers_; ++i) {
    decode += worker_clocks_[i].decode.read();
    augment += worker_clocks_[i].augment.read();
  }
  sent_.write(out, {{"read", metrics::seconds_of(read_clock_.read())},
                    {"decode", metrics::seconds_of(decode)},
                    {"augment", metrics::seconds_of(augment)}});
  out.family("tensorcom_server_skipped_samples_total", metrics::MetricType::kCounter,
             "Samples skipped instead of served, by reason.");
  // Every reason from the start, at 0 until it happens: a query for one
  // finds its series on a healthy server too.
  const SkipCounter::Counts skipped = skips_.counts();
  for (const imaging::Problem problem : imaging::kAllProblems) {
    out.sample(skipped[static_cast<std::size_t>(problem)], {{"reason", imaging::problem_name(problem)}});
  }
  out.family("tensorcom_server_replaced_samples_total", metrics::MetricType::kCounter,
             "Skipped samples whose place a neighbour in the epoch's order filled, by why they were skipped.");
  const SkipCounter::Counts replaced = replaced_counts();
  for (const imaging::Problem problem : imaging::kAllProblems) {
    out.sample(replaced[static_cast<std::size_t>(problem)], {{"reason", imaging::problem_name(problem)}});
  }
  out.counter("tensorcom_server_shard_errors_total", "Shards (or files) abandoned part way for an error.",
              shard_errors());
  out.family("tensorcom_server_queue_depth", metrics::MetricType::kGauge,
             "Items waiting now: encoded samples for a worker (decode), full batches for sending (send).");
  out.sample(static_cast<double>(queues.decode), {{"queue", "decode"}});
  out.sample(static_cast<double>(queues.send), {{"queue", "send"}});
  out.gauge("tensorcom_server_workers", "Decoding threads: the most decode + augment seconds a second can take.",
            static_cast<double>(workers_));
}

}  // namespace tensorcom::pipeline
