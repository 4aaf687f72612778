// serve-ten: serves the lists of .ten files, in order, epoch after epoch; for
// replaying recorded batches and for measuring the transport alone.
//   serve-ten -i 'batches-{0..3}.ten' --epochs 2 zpush://127.0.0.1:7880
#include <boost/program_options.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <iostream>
#include <memory>
#include <thread>

#include "tensorcom/codec/metadata.h"
#include "tensorcom/transport/brace.h"
#include "tensorcom/transport/connection.h"
#include "tensorcom/transport/connection_controls.h"
#include "tensorcom/codec/ten_file.h"
#include "tensorcom/programs/curve_options.h"
#include "tensorcom/metrics/metrics_server.h"
#include "tensorcom/programs/program.h"
#include "tensorcom/metrics/sender_metrics.h"

namespace po = boost::program_options;
using namespace tensorcom;

namespace {

// Recordings up to this size are sent from memory every epoch.
constexpr std::int64_t kDefaultCacheBytes = std::int64_t{1} << 30;
// Unused read buffers kept when --queue-bytes does not bound the queue.
constexpr std::size_t kDefaultPoolBytes = std::size_t{256} << 20;

struct ServeTenOptions {
  std::vector<std::string> inputs;     // .ten files, brace-expanded
  std::vector<std::string> addresses;  // URLs to serve on
  std::uint64_t epochs = 1;            // passes over the inputs (0: forever)
  double rate = 0;                     // batches/s limit (0: none)
  std::uint64_t report = 0;            // report line every N batches (0: never)
  std::size_t group = kInferListLength;
  std::int64_t cache_bytes = kDefaultCacheBytes;  // lists kept in memory from the start (signed: -1 is refused)
  ConnectionOptions connection;
  std::string metrics_address;             // HOST:PORT for Prometheus metrics (empty: none)
  double metrics_hold_s = 0;               // seconds to keep answering scrapes at the end
  Milliseconds wait_for_receiver{120000};  // zpush: before the first list (0: no wait)
};

// Recorded batches keep the receipt requests of the server that sent them
// first; sent again under them, receivers would confirm to a server long
// gone and drop a second pass over the files as copies. A list whose
// metadata asks for receipts goes out with metadata that does not.
TensorList without_receipt(const TensorList& list) {
  if (list.empty() || list.back().info() != kMetadataInfo) return list;
  std::optional<BatchMetadata> metadata;
  try {
    metadata = find_metadata(list);
  } catch (const FormatError&) {
    return list;  // not ours to judge: sent as recorded
  }
  if (!metadata || !metadata->receipt) return list;
  metadata->receipt.reset();
  TensorList out(list.begin(), list.end() - 1);
  out.push_back(metadata_tensor(*metadata));
  return out;
}

// The input files, brace-expanded, how many lists they hold, and the lists
// of the files kept in memory.
struct Inputs {
  std::vector<std::string> files;
  // Per file: its lists when the whole file fit in what was left of the
  // cache, ready to send (see without_receipt); nothing when it is read
  // as it is sent.
  std::vector<std::optional<std::vector<TensorList>>> cached;
  std::uint64_t lists = 0;
  std::uint64_t cached_bytes = 0;
};

// Reads every list once, one at a time, so that a damaged file is refused
// before anything is sent. Whole files are kept while they fit in
// cache_bytes: sent from memory, a list costs no read and no copy (ZeroMQ
// sends straight from the buffer), and the transport, not the page cache,
// sets the pace. Memory holds at most cache_bytes plus one list.
Inputs check_inputs(const std::vector<std::string>& patterns, std::size_t group, std::int64_t cache_bytes) {
  Inputs inputs{brace_expand_all(patterns), {}, 0, 0};
  for (const std::string& file : inputs.files) {
    TenListReader reader(file, group);
    std::vector<TensorList> kept;
    std::uint64_t kept_bytes = 0;
    bool fits = true;
    while (auto list = reader.next()) {
      ++inputs.lists;
      if (!fits) continue;
      kept_bytes += batch_bytes(*list);
      fits = inputs.cached_bytes + kept_bytes <= static_cast<std::uint64_t>(cache_bytes);
      if (fits) {
        kept.push_back(without_receipt(*list));
      } else {
        kept = {};  // the file is read as it is sent
      }
    }
    if (fits) inputs.cached_bytes += kept_bytes;
    inputs.cached.push_back(fits ? std::optional(std::move(kept)) : std::nullopt);
  }
  if (inputs.lists == 0) throw ArgumentError("the input files hold no tensors");
  return inputs;
}

// Caps the send rate with a token bucket: tokens accrue at `rate` a second
// up to a burst of max(2, rate / 10), and each batch takes one. Time lost to
// a stall (a blocked send, no peer yet) is never made up beyond that burst,
// so any window of T seconds holds at most rate * T + burst batches. (The
// earlier schedule, batch n at n / rate, sent everything owed at once.)
class RatePacer {
 public:
  // rate 0: no limit.
  explicit RatePacer(double rate) : rate_(rate), burst_(std::max(2.0, rate / 10)), tokens_(burst_) {}

  // Waits until a batch may leave, and takes its token.
  void wait() {
    if (rate_ <= 0) return;
    refill();
    if (tokens_ < 1) {
      std::this_thread::sleep_until(
          last_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>((1 - tokens_) / rate_)));
      refill();
    }
    tokens_ -= 1;
  }

 private:
  using Clock = std::chrono::steady_clock;
  void refill() {
    const Clock::time_point now = Clock::now();
    tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
    last_ = now;
  }

  double rate_;
  double burst_;
  double tokens_;
  Clock::time_point last_ = Clock::now();
};

// Sends; returns false if a stop signal came first. A PUB connection
// waits for a subscriber: sending to nobody would only burn a core.
bool send_unless_stopped(Connection& connection, const TensorList& list, metrics::SenderMetrics& metrics) {
  const auto start = std::chrono::steady_clock::now();
  StoppableSend how;
  how.stop_requested = programs::stop_requested;
  how.on_subscribers = [&metrics](std::uint64_t subscribers) { metrics.set_subscribers(subscribers); };
  if (!send_until_stopped(connection, list, how)) return false;
  metrics.add_send_blocked(std::chrono::steady_clock::now() - start);
  metrics.sent(batch_size(list), batch_bytes(list));
  return true;
}

// Throws if no receiver came in time.
void await_receiver(Connection& connection, Milliseconds wait) {
  const auto say = [](std::string_view line) { std::cout << "serve-ten: " << line << std::endl; };
  if (wait_for_receiver(connection, wait, programs::stop_requested, say) || programs::stop_requested()) return;
  throw TransportError("no receiver came to " + connection.describe() + " within " +
                       std::to_string(wait.count() / 1000) + " s (--wait-for-receiver): nothing was sent");
}

// Sends lists at the paced rate, counting them and printing report lines.
class ListSender {
 public:
  ListSender(Connection& connection, metrics::SenderMetrics& metrics, const ServeTenOptions& options)
      : connection_(connection), metrics_(metrics), pacer_(options.rate), report_(options.report) {}

  // Returns false if a stop signal came first.
  bool send(const TensorList& list) {
    pacer_.wait();
    if (!send_unless_stopped(connection_, list, metrics_)) return false;
    ++sent_;
    if (report_ && sent_ % report_ == 0) {
      std::cout << "serve-ten: " << sent_ << " batches " << connection_.stats().summary() << std::endl;
    }
    return true;
  }
  [[nodiscard]] std::uint64_t sent() const noexcept { return sent_; }

 private:
  Connection& connection_;
  metrics::SenderMetrics& metrics_;
  RatePacer pacer_;
  std::uint64_t report_;
  std::uint64_t sent_ = 0;
};

// Says which files did not fit in memory: sending them costs a read and a
// copy a list, which may bound the rate.
void report_files_read_as_sent(const Inputs& inputs, std::int64_t cache_bytes) {
  const auto read_as_sent = std::count(inputs.cached.begin(), inputs.cached.end(), std::nullopt);
  if (read_as_sent == 0) return;
  std::cout << "serve-ten: " << read_as_sent << " of " << inputs.files.size() << " files are read as they are sent ("
            << inputs.cached_bytes << " bytes of lists in memory, --cache-bytes " << cache_bytes << ")" << std::endl;
}

// Sends one file's lists as it reads them: memory holds one list beyond
// what ZeroMQ has queued, and a file cut or rewritten since the last pass
// is an error naming it (never SIGBUS, as a mapping would be).
bool serve_file(const std::string& file, std::size_t group, const ReadBufferPool& pool, ListSender& sender) {
  TenListReader reader(file, group, {}, &pool);
  while (auto list = reader.next()) {
    if (programs::stop_requested() || !sender.send(without_receipt(*list))) return false;
  }
  return true;
}

// One pass over the inputs; returns false if a stop signal came first.
bool serve_epoch(const Inputs& inputs, std::size_t group, const ReadBufferPool& pool, ListSender& sender) {
  const std::uint64_t before = sender.sent();
  for (std::size_t i = 0; i < inputs.files.size(); ++i) {
    if (!inputs.cached[i]) {
      if (!serve_file(inputs.files[i], group, pool, sender)) return false;
      continue;
    }
    for (const TensorList& list : *inputs.cached[i]) {
      if (programs::stop_requested() || !sender.send(list)) return false;
    }
  }
  // Files emptied since the start would otherwise make --epochs 0 spin.
  if (sender.sent() == before) throw ArgumentError("the input files hold no tensors any more");
  return true;
}

int serve(const ServeTenOptions& options) {
  const Inputs inputs = check_inputs(options.inputs, options.group, options.cache_bytes);
  programs::refuse_inproc(options.addresses);
  Connection connection(options.addresses, options.connection);
  std::cout << "serve-ten: " << inputs.lists << " lists on " << connection.describe();
  for (const std::string& bound : connection.bound_addresses()) std::cout << " [bound " << bound << "]";
  std::cout << std::endl;
  report_files_read_as_sent(inputs, options.cache_bytes);
  metrics::SenderMetrics metrics;
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (!options.metrics_address.empty()) {
    metrics_server = std::make_unique<metrics::MetricsServer>(
        options.metrics_address, [&metrics](metrics::MetricsText& out) { metrics.write(out); });
    std::cout << "serve-ten: metrics: " << metrics_server->url() << std::endl;
  }

  await_receiver(connection, options.wait_for_receiver);
  ListSender sender(connection, metrics, options);
  // The files read as they are sent reuse the buffers of lists sent; at
  // most a queue's worth is kept unused.
  const ReadBufferPool pool(options.connection.queue_bytes > 0 ? options.connection.queue_bytes : kDefaultPoolBytes);
  for (std::uint64_t epoch = 0; (options.epochs == 0 || epoch < options.epochs) && !programs::stop_requested();
       ++epoch) {
    if (!serve_epoch(inputs, options.group, pool, sender)) break;
  }
  if (programs::stop_requested()) shorten_linger_for_stop(connection);
  const Statistics& stats = connection.stats();
  std::cout << "serve-ten: done, " << stats.batches() << " batches, " << stats.samples() << " samples, "
            << stats.bytes() << " bytes in " << stats.seconds() << " s" << std::endl;
  if (metrics_server) metrics::hold_for_scrapes(options.metrics_hold_s, programs::stop_requested);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return programs::program_main("serve-ten", [&]() -> int {
    ServeTenOptions o;
    std::int64_t linger_ms = 10000;
    double wait_for_receiver_s = 120;
    po::options_description options(std::string("serve-ten [options] [ADDRESS...] (default ") +
                                    programs::kDefaultServeUrl + ")");
    options.add_options()("help,h", "show this help")("input,i", po::value(&o.inputs)->required(),
                                                      ".ten file to serve (repeatable, brace-expanded)")(
        "epochs", po::value(&o.epochs)->default_value(1), "passes over the inputs (0: forever)")(
        "rate", po::value(&o.rate)->default_value(0),
        "batches per second at most, in bursts of at most max(2, rate/10) (0: no limit)")(
        "report,r", po::value(&o.report)->default_value(0), "print a rate line every N batches (0: never)")(
        "group,g", po::value(&o.group)->default_value(kInferListLength), "tensors per list in the files (0: infer)")(
        "cache-bytes", po::value(&o.cache_bytes)->default_value(o.cache_bytes),
        "bytes of lists kept in memory from the start: whole files that fit are sent from memory every epoch, the "
        "rest read as sent (0: read every list as it is sent)")("single",
                                                                "send single-buffer messages instead of multipart")(
        "hwm", po::value(&o.connection.send_high_water_mark)->default_value(1000),
        "batches queued per peer (ZeroMQ's count), at most --queue-bytes of them")(
        "queue-bytes", po::value(&o.connection.queue_bytes)->default_value(o.connection.queue_bytes),
        "bytes of batches queued per peer (0: --hwm alone)")(
        "linger", po::value(&linger_ms)->default_value(linger_ms),
        "ms to wait at exit for queued batches to be delivered (-1: forever; after a stop signal: PUB none, PUSH at "
        "most 1000)")("metrics", po::value(&o.metrics_address),
                      "serve Prometheus metrics on HOST:PORT (port 0: any; default: none)")(
        "wait-for-receiver", po::value(&wait_for_receiver_s)->default_value(wait_for_receiver_s),
        "PUSH that connects (zpush://): seconds to wait for a receiver before the first list, then fail (0: do "
        "not wait)")("metrics-hold", po::value(&o.metrics_hold_s)->default_value(0),
                     "seconds to keep answering scrapes after serving ends")("address", po::value(&o.addresses),
                                                                             "URLs to serve on (brace-expanded)");
    programs::CurveFlags curve;
    programs::add_curve_options(options, curve);
    po::positional_options_description positional;
    positional.add("address", -1);
    po::variables_map vars;
    po::store(po::command_line_parser(argc, argv).options(options).positional(positional).run(), vars);
    if (vars.count("help")) return programs::print_usage(options, true);
    po::notify(vars);
    if (o.cache_bytes < 0) {
      throw ArgumentError("--cache-bytes " + std::to_string(o.cache_bytes) + ": expected 0 or more bytes");
    }
    if (!(o.rate >= 0) || !std::isfinite(o.rate)) {
      throw ArgumentError("--rate " + std::to_string(o.rate) +
                          ": expected a finite number of batches per second, 0 for no limit");
    }
    o.wait_for_receiver = programs::seconds_option("--wait-for-receiver", wait_for_receiver_s);
    if (o.addresses.empty()) o.addresses = {programs::kDefaultServeUrl};
    if (vars.count("single")) o.connection.framing = Framing::kSingleBuffer;
    o.connection.linger = Milliseconds(linger_ms);
    o.connection.curve = programs::curve_security(curve);
    if (!o.metrics_address.empty()) (void)metrics::parse_host_port(o.metrics_address);  // refused before serving
    programs::install_stop_handlers();
    return serve(o);
  });
}
