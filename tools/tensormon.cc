// tensormon: how fast batches arrive and how big they are, before training.
//   tensormon                                  the reference's line every 10 batches
//   tensormon -r 100 'zsub://gpu{1..4}:7880'   several servers, fair-queued
//   tensormon --json -c 1000 zrpull://*:7880   JSON lines, then a summary, then exit
//   tensormon --step-ms 120 --metrics 0.0.0.0:9101   a trainer's pace; Prometheus metrics
// On a terminal the lines become one live line, rewritten in place. Every
// line ends with the bottleneck: the producer when tensormon spent most of
// the time waiting for batches, else the consumer (tensormon, and the step
// it simulates).
#include <unistd.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "batch_source.h"
#include "json.h"
#include "tensorcom/metrics/metrics_server.h"
#include "tensorcom/programs/program.h"
#include "tensorcom/metrics/receiver_metrics.h"

namespace po = boost::program_options;
using namespace tensorcom;
using namespace tensorcom::tools;

namespace {

using Clock = std::chrono::steady_clock;

// The shortest span a rate is computed over. Batches that queued up while
// tensormon connected (or paused) arrive microseconds apart: over a shorter
// span they read as a hundred thousand batches a second. Over half a
// second, k queued batches add at most 2k a second.
constexpr auto kShortestRateSpan = std::chrono::milliseconds(500);
// How often the live display is redrawn: no faster than a rate can be
// computed, and slow enough that the terminal is not the bottleneck.
constexpr auto kLiveInterval = kShortestRateSpan;
constexpr double kBytesPerMegabyte = 1e6;

struct MonitorOptions {
  SourceOptions source;
  std::int64_t report = 10;     // a report every N batches
  std::int64_t count = 0;       // stop after this many batches (0: never)
  bool json = false;            // JSON lines instead of text
  bool live = false;            // rewrite one line (stdout is a terminal and not --json)
  double step_ms = 0;           // time spent per batch, as a trainer's step would (0: none)
  std::string metrics_address;  // HOST:PORT for Prometheus metrics (empty: none)
};

struct Rates {
  double batches_per_s = 0;
  double samples_per_s = 0;
  double mb_per_s = 0;
  double waiting = 0;  // share of the time spent waiting for batches, 0 .. 1
};

// Waiting for batches most of the time means the producers cannot keep up;
// waiting little means batches queue up for the consumer.
constexpr double kProducerBound = 0.5;

// "bottleneck: producer (waiting 83%)".
std::string bottleneck(double waiting) {
  char text[64];
  std::snprintf(text, sizeof text, "bottleneck: %s (waiting %.0f%%)",
                waiting >= kProducerBound ? "producer" : "consumer", 100 * waiting);
  return text;
}

const char* bottleneck_word(double waiting) { return waiting >= kProducerBound ? "producer" : "consumer"; }

// The share of `seconds` spent blocked, clamped: both come from separate clocks.
double waiting_share(double blocked_seconds, double seconds) {
  return seconds > 0 ? std::clamp(blocked_seconds / seconds, 0.0, 1.0) : 0.0;
}

// Rates over [from, to] of `batches` batches holding samples and bytes; 0
// for an empty span.
Rates rates_over(double seconds, std::uint64_t batches, std::uint64_t samples, std::uint64_t bytes) {
  if (seconds <= 0) return {};
  return {static_cast<double>(batches) / seconds, static_cast<double>(samples) / seconds,
          static_cast<double>(bytes) / seconds / kBytesPerMegabyte};
}

// The batches since the last report. Its clock starts at a batch's arrival,
// which it does not count: n batches after it span n intervals.
class RateWindow {
 public:
  void restart(Clock::time_point now, double blocked_seconds) {
    start_ = now;
    blocked_at_start_ = blocked_seconds;
    batches_ = samples_ = bytes_ = 0;
  }
  void add(std::uint64_t samples, std::uint64_t bytes) {
    ++batches_;
    samples_ += samples;
    bytes_ += bytes;
  }
  // Whether the window is long enough for its rates to mean something.
  [[nodiscard]] bool long_enough(Clock::time_point now) const { return now - start_ >= kShortestRateSpan; }
  [[nodiscard]] Rates rates(Clock::time_point now, double blocked_seconds) const {
    const double seconds = std::chrono::duration<double>(now - start_).count();
    Rates r = rates_over(seconds, batches_, samples_, bytes_);
    r.waiting = waiting_share(blocked_seconds - blocked_at_start_, seconds);
    return r;
  }

 private:
  Clock::time_point start_{};
  double blocked_at_start_ = 0;
  std::uint64_t batches_ = 0;
  std::uint64_t samples_ = 0;
  std::uint64_t bytes_ = 0;
};

// The reference's line exactly, so that scripts parsing it keep working;
// what it lacks (MB/s, the bottleneck) comes after it.
std::string report_line(std::uint64_t index, const Rates& r, std::uint64_t batch_size) {
  char line[200];
  std::snprintf(line, sizeof line, "%20" PRIu64 " %8.3f batches/s %8.3f samples/s (batchsize: %" PRIu64 ") %8.3f MB/s",
                index, r.batches_per_s, r.samples_per_s, batch_size, r.mb_per_s);
  return std::string(line) + "; " + bottleneck(r.waiting);
}

std::string report_json(std::uint64_t index, const Rates& r, std::uint64_t batch_size) {
  return Json{{"index", index},
              {"batches_per_s", r.batches_per_s},
              {"samples_per_s", r.samples_per_s},
              {"mb_per_s", r.mb_per_s},
              {"batch_size", batch_size},
              {"waiting", r.waiting},
              {"bottleneck", bottleneck_word(r.waiting)}}
      .dump();
}

// Prints reports as batches arrive, and the summary at the end.
class Monitor {
 public:
  explicit Monitor(const MonitorOptions& options) : options_(options) {}

  // blocked_seconds: the receiver's total time waiting for batches so far.
  void add(const TensorList& batch, Clock::time_point now, double blocked_seconds) {
    const std::uint64_t samples = batch_size(batch);
    const std::uint64_t bytes = batch_bytes(batch);
    if (index_++ == 0) {
      first_samples_ = samples;
      first_bytes_ = bytes;
      first_blocked_ = blocked_seconds;
      window_.restart(now, blocked_seconds);
      last_draw_ = now;
    } else {
      window_.add(samples, bytes);
    }
    if (options_.live) {
      if (now - last_draw_ >= kLiveInterval) draw_live(now, samples, blocked_seconds);
    } else {
      // A line every N batches, as the reference prints, but one that falls
      // less than kShortestRateSpan after the last waits for the next batch
      // that ends a long enough window.
      if (index_ % static_cast<std::uint64_t>(options_.report) == 0) report_due_ = true;
      if (report_due_ && window_.long_enough(now)) report(now, samples, blocked_seconds);
    }
  }

  // Ends the live line, if one is showing, so that other output starts clean.
  void end_live_line() {
    if (!live_line_shown_) return;
    std::cout << '\n' << std::flush;
    live_line_shown_ = false;
  }

  // The whole run. The clock starts at the first batch, so the rates count
  // the batches after it.
  void print_summary(const Statistics& stats) {
    end_live_line();
    const double seconds = stats.seconds();
    Rates r = stats.batches() < 2 ? Rates{}
                                  : rates_over(seconds, stats.batches() - 1, stats.samples() - first_samples_,
                                               stats.bytes() - first_bytes_);
    // Without two batches there is no consumer time to weigh: all of it was waiting.
    r.waiting = stats.batches() < 2 ? 1.0 : waiting_share(stats.blocked_seconds() - first_blocked_, seconds);
    if (options_.json) {
      std::cout << Json{{"summary", true},
                        {"batches", stats.batches()},
                        {"samples", stats.samples()},
                        {"bytes", stats.bytes()},
                        {"seconds", seconds},
                        {"batches_per_s", r.batches_per_s},
                        {"samples_per_s", r.samples_per_s},
                        {"mb_per_s", r.mb_per_s},
                        {"waiting", r.waiting},
                        {"bottleneck", bottleneck_word(r.waiting)}}
                       .dump()
                << std::endl;
      return;
    }
    char line[300];
    std::snprintf(line, sizeof line,
                  "tensormon: done, %" PRIu64 " batches, %" PRIu64 " samples, %" PRIu64
                  " bytes in %.3f s: %.3f batches/s %.3f samples/s %.3f MB/s",
                  stats.batches(), stats.samples(), stats.bytes(), seconds, r.batches_per_s, r.samples_per_s,
                  r.mb_per_s);
    std::cout << line << "; " << bottleneck(r.waiting) << std::endl;
  }

 private:
  void report(Clock::time_point now, std::uint64_t batch_size, double blocked_seconds) {
    const Rates r = window_.rates(now, blocked_seconds);
    std::cout << (options_.json ? report_json(index_, r, batch_size) : report_line(index_, r, batch_size)) << std::endl;
    window_.restart(now, blocked_seconds);
    report_due_ = false;
  }

  // "\x1b[K" clears what a longer previous line left on the right.
  void draw_live(Clock::time_point now, std::uint64_t batch_size, double blocked_seconds) {
    std::cout << '\r' << report_line(index_, window_.rates(now, blocked_seconds), batch_size) << "\x1b[K" << std::flush;
    live_line_shown_ = true;
    window_.restart(now, blocked_seconds);
    last_draw_ = now;
  }

  MonitorOptions options_;
  std::uint64_t index_ = 0;
  std::uint64_t first_samples_ = 0;
  std::uint64_t first_bytes_ = 0;
  double first_blocked_ = 0;  // waiting before the first batch is not counted
  RateWindow window_;
  bool report_due_ = false;  // N batches passed since the last line, too quickly to print one
  Clock::time_point last_draw_{};
  bool live_line_shown_ = false;
};

// Serves the receiver's metrics while it lives, if an address was given.
std::unique_ptr<metrics::MetricsServer> start_metrics(const MonitorOptions& options,
                                                      const metrics::ReceiverMetrics& metrics) {
  if (options.metrics_address.empty()) return nullptr;
  auto server = std::make_unique<metrics::MetricsServer>(options.metrics_address,
                                                         [&metrics](metrics::MetricsText& out) { metrics.write(out); });
  std::cerr << "tensormon: metrics: " << server->url() << std::endl;
  return server;
}

int monitor(const MonitorOptions& options) {
  BatchSource source("tensormon", options.source);
  metrics::ReceiverMetrics metrics;
  const auto metrics_server = start_metrics(options, metrics);
  Monitor monitor(options);
  source.set_before_message([&monitor] { monitor.end_live_line(); });
  const auto step =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(options.step_ms));
  std::uint64_t received = 0;
  while (options.count == 0 || received < static_cast<std::uint64_t>(options.count)) {
    std::optional<TensorList> batch = source.next();
    metrics.update(source.connection());
    if (!batch) break;
    ++received;
    monitor.add(*batch, Clock::now(), source.stats().blocked_seconds());
    if (step.count() > 0) std::this_thread::sleep_for(step);
  }
  monitor.print_summary(source.stats());
  return source.exit_status();
}

}  // namespace

int main(int argc, char** argv) {
  return programs::program_main("tensormon", [&]() -> int {
    MonitorOptions o;
    po::options_description options("options");
    options.add_options()("help,h", "show this help")(
        "report,r", po::value(&o.report)->default_value(o.report),
        "report every N batches (at least half a second apart: a line falling sooner waits for a later batch)")(
        "count,c", po::value(&o.count)->default_value(o.count),
        "stop after COUNT batches and print a summary (0: never)")(
        "json", po::bool_switch(&o.json), "print JSON objects, one a line, the last with \"summary\": true")(
        "step-ms", po::value(&o.step_ms)->default_value(o.step_ms),
        "spend MS milliseconds per batch, as a trainer's step would: do the servers keep up with it?")(
        "metrics", po::value(&o.metrics_address), "serve Prometheus metrics on HOST:PORT (port 0: any; default: none)")(
        "raw,R", po::bool_switch(),
        "the reference's raw receive, accepted: receiving here decodes no tensor data (zero-copy views), so it "
        "changes nothing");
    add_source_options(options, o.source);
    auto vars = parse_command_line(argc, argv,
                                   "usage: tensormon [-r N] [-c COUNT] [--json] [URL...]  (default URL " +
                                       std::string(programs::kDefaultReceiveUrl) + ", brace-expanded)",
                                   options, o.source);
    if (!vars) return 0;
    if (o.report < 1) throw po::error("--report must be at least 1");
    if (o.count < 0) throw po::error("--count must not be negative");
    if (!(o.step_ms >= 0 && o.step_ms <= 3.6e6)) throw po::error("--step-ms must be from 0 to 3600000");
    if (!o.metrics_address.empty()) (void)metrics::parse_host_port(o.metrics_address);  // refused before receiving
    o.live = !o.json && ::isatty(STDOUT_FILENO);
    return monitor(o);
  });
}
