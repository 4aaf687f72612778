// serve-ten: serves the lists of .ten files, in order, epoch after epoch; for
// replaying recorded batches and for measuring the transport alone.
//   serve-ten -i 'batches-{0..3}.ten' --epochs 2 zpush://127.0.0.1:7880
#include <boost/program_options.hpp>

#include <cerrno>
#include <iostream>
#include <memory>
#include <thread>

#include "tensorcom/brace.h"
#include "tensorcom/connection.h"
#include "tensorcom/ten_file.h"
#include "tensorcom/programs/curve_options.h"
#include "tensorcom/metrics/metrics_server.h"
#include "tensorcom/programs/program.h"
#include "tensorcom/metrics/sender_metrics.h"

namespace po = boost::program_options;
using namespace tensorcom;

namespace {

struct ServeTenOptions {
  std::vector<std::string> inputs;     // .ten files, brace-expanded
  std::vector<std::string> addresses;  // URLs to serve on
  std::uint64_t epochs = 1;            // passes over the inputs (0: forever)
  double rate = 0;                     // batches/s limit (0: none)
  std::uint64_t report = 0;            // report line every N batches (0: never)
  std::size_t group = kInferListLength;
  ConnectionOptions connection;
  std::string metrics_address;  // HOST:PORT for Prometheus metrics (empty: none)
  double metrics_hold_s = 0;    // seconds to keep answering scrapes at the end
};

std::vector<TensorList> load_lists(const std::vector<std::string>& patterns, std::size_t group) {
  std::vector<TensorList> lists;
  for (const std::string& file : brace_expand_all(patterns)) {
    for (TensorList& list : read_ten_lists(file, group)) lists.push_back(std::move(list));
  }
  if (lists.empty()) throw ArgumentError("the input files hold no tensors");
  return lists;
}

// Sleeps so that batch number `sent` leaves no earlier than sent / rate
// seconds after start.
void pace(double rate, std::uint64_t sent, std::chrono::steady_clock::time_point start) {
  if (rate <= 0) return;
  auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(static_cast<double>(sent) / rate));
  std::this_thread::sleep_until(due);
}

// Sends; returns false if a stop signal came first. A PUB connection
// waits for a subscriber: sending to nobody would only burn a core.
bool send_unless_stopped(Connection& connection, const TensorList& list, metrics::SenderMetrics& metrics) {
  const auto start = std::chrono::steady_clock::now();
  try {
    while (!connection.wait_for_subscriber(Milliseconds(100))) {
      metrics.set_subscribers(0);
      if (programs::stop_requested()) return false;
    }
    metrics.set_subscribers(connection.subscribers());
    connection.send(list);
    metrics.add_send_blocked(std::chrono::steady_clock::now() - start);
    metrics.sent(batch_size(list), batch_bytes(list));
    return true;
  } catch (const TransportError& e) {
    if (e.code() == EINTR && programs::stop_requested()) return false;
    throw;
  }
}

int serve(const ServeTenOptions& options) {
  std::vector<TensorList> lists = load_lists(options.inputs, options.group);
  Connection connection(options.addresses, options.connection);
  std::cout << "serve-ten: " << lists.size() << " lists on " << connection.describe();
  for (const std::string& bound : connection.bound_addresses()) std::cout << " [bound " << bound << "]";
  std::cout << std::endl;
  metrics::SenderMetrics metrics;
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (!options.metrics_address.empty()) {
    metrics_server = std::make_unique<metrics::MetricsServer>(
        options.metrics_address, [&metrics](metrics::MetricsText& out) { metrics.write(out); });
    std::cout << "serve-ten: metrics: " << metrics_server->url() << std::endl;
  }

  auto start = std::chrono::steady_clock::now();
  std::uint64_t sent = 0;
  for (std::uint64_t epoch = 0; (options.epochs == 0 || epoch < options.epochs) && !programs::stop_requested();
       ++epoch) {
    for (const TensorList& list : lists) {
      if (programs::stop_requested()) break;
      pace(options.rate, sent, start);
      if (!send_unless_stopped(connection, list, metrics)) break;
      ++sent;
      if (options.report && sent % options.report == 0) {
        std::cout << "serve-ten: " << sent << " batches " << connection.stats().summary() << std::endl;
      }
    }
  }
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
    po::options_description options(std::string("serve-ten [options] [ADDRESS...] (default ") +
                                    programs::kDefaultServeUrl + ")");
    options.add_options()("help,h", "show this help")("input,i", po::value(&o.inputs)->required(),
                                                      ".ten file to serve (repeatable, brace-expanded)")(
        "epochs", po::value(&o.epochs)->default_value(1), "passes over the inputs (0: forever)")(
        "rate", po::value(&o.rate)->default_value(0), "batches per second at most (0: no limit)")(
        "report,r", po::value(&o.report)->default_value(0), "print a rate line every N batches (0: never)")(
        "group,g", po::value(&o.group)->default_value(kInferListLength), "tensors per list in the files (0: infer)")(
        "single", "send single-buffer messages instead of multipart")(
        "hwm", po::value(&o.connection.send_high_water_mark)->default_value(1000),
        "batches queued per peer (ZeroMQ's count), at most --queue-bytes of them")(
        "queue-bytes", po::value(&o.connection.queue_bytes)->default_value(o.connection.queue_bytes),
        "bytes of batches queued per peer (0: --hwm alone)")(
        "linger", po::value(&linger_ms)->default_value(linger_ms),
        "ms to wait at exit for queued batches to be delivered (-1: forever)")(
        "metrics", po::value(&o.metrics_address), "serve Prometheus metrics on HOST:PORT (port 0: any; default: none)")(
        "metrics-hold", po::value(&o.metrics_hold_s)->default_value(0),
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
    if (o.addresses.empty()) o.addresses = {programs::kDefaultServeUrl};
    if (vars.count("single")) o.connection.framing = Framing::kSingleBuffer;
    o.connection.linger = Milliseconds(linger_ms);
    o.connection.curve = programs::curve_security(curve);
    if (!o.metrics_address.empty()) (void)metrics::parse_host_port(o.metrics_address);  // refused before serving
    programs::install_stop_handlers();
    return serve(o);
  });
}
