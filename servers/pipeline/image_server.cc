#include "image_server.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "batch_assembler.h"
#include "batch_publisher.h"
#include "bounded_queue.h"
#include "epoch_reader.h"
#include "memory_budget.h"
#include "read_ahead_source.h"
#include "server_counters.h"
#include "slot_filler.h"
#include "tensorcom/metrics/metrics_server.h"
#include "tensorcom/transport/connection_controls.h"
#include "tensorcom/transport/url.h"

namespace tensorcom::pipeline {

namespace {

std::string default_server_id() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(::getpid());
}

// The images' size in `epoch`.
int epoch_size(const ImageServerOptions& o, std::uint64_t epoch) {
  return o.size_schedule ? o.size_schedule->size_at(epoch) : o.format.size;
}

int largest_size(const ImageServerOptions& o) { return o.size_schedule ? o.size_schedule->largest() : o.format.size; }

BatchFormat format_of(const ImageServerOptions& o, int size) {
  BatchFormat format = o.format;
  format.size = size;
  return format;
}

std::size_t worker_count(const ImageServerOptions& o) { return static_cast<std::size_t>(std::max(o.workers, 1)); }

std::size_t batch_buffers(const ImageServerOptions& o) {
  if (o.max_batches) return o.max_batches;
  // Batches being filled by the workers, one ready, one being sent. What
  // ZeroMQ still holds once sent is bounded per peer by its high-water mark.
  std::size_t in_flight = 2 + 2 * static_cast<std::size_t>(o.workers) / o.format.batch_size;
  return std::max<std::size_t>(in_flight + 2, 4);
}

std::size_t queue_capacity(const ImageServerOptions& o) { return 4 * worker_count(o) + o.format.batch_size; }

ConnectionOptions connection_options(const ImageServerOptions& o) {
  ConnectionOptions c = o.connection;
  if (o.subscribers) c.publish_no_drop = true;  // every subscriber gets every batch
  return c;
}

ServerLog server_log(const ImageServerOptions& o) { return ServerLog(o.program, o.progress, o.warnings); }

// What became of the batches sent, for the summary.
std::string delivery_note(const DeliveryOutcome& d) {
  if (!d.confirmed) return {};
  std::string note =
      std::to_string(d.counts.confirmed) + " of " + std::to_string(d.counts.sent) + " batches confirmed by receivers";
  if (d.counts.resent) note += ", " + std::to_string(d.counts.resent) + " sent again after a lost connection";
  return note;
}

// The reader's samples go to the assembler (batches opened in order) and to
// the workers' queue.
class AssemblerOutput final : public ReaderOutput {
 public:
  AssemblerOutput(BatchAssembler& assembler, BoundedQueue<Dispatched>& queue) : assembler_(assembler), queue_(queue) {}
  bool open_batch(BatchPlace place, std::size_t expected, int size) override {
    return assembler_.open(place, expected, size);
  }
  void end_epoch_at(BatchPlace place, std::size_t count) override { assembler_.end_epoch_at(place, count); }
  bool dispatch(Dispatched dispatched) override { return queue_.push(std::move(dispatched)); }

 private:
  BatchAssembler& assembler_;
  BoundedQueue<Dispatched>& queue_;
};

ReaderOptions reader_options_of(const ImageServerOptions& o, std::uint64_t memory_limit) {
  ReaderOptions r;
  r.order = o.order;
  r.shuffle_buffer = o.shuffle_buffer;
  r.batch_size = o.format.batch_size;
  r.epochs = o.epochs;
  r.epoch_batches = o.epoch_batches;
  r.epoch_samples = o.epoch_samples;
  r.memory_limit = memory_limit;
  r.resume = o.resume;
  r.size_at = [&o](std::uint64_t epoch) { return epoch_size(o, epoch); };
  r.announce_sizes = o.size_schedule.has_value();
  return r;
}

FillerOptions filler_options_of(const ImageServerOptions& o) {
  FillerOptions f;
  f.augment = o.augment;
  // Repeats of a sample on other ranks sit where its first does: the rank
  // makes their augmentations differ.
  f.seed = o.order.repeats > 1 ? o.order.seed ^ (0x9E3779B97F4A7C15 * (o.order.rank + 1)) : o.order.seed;
  f.batch_size = o.format.batch_size;
  f.classes = o.classes;
  f.max_image_bytes = o.max_image_bytes;
  f.image_bytes_fit_memory = o.image_bytes_fit_memory;
  f.first_size = epoch_size(o, 0);
  f.largest = format_of(o, largest_size(o));
  return f;
}

// Receipts reach a sender over tcp or ipc only.
bool confirms_delivery(const ImageServerOptions& o) {
  if (!o.format.metadata || o.unconfirmed || o.repeat_first_batch) return false;
  const std::vector<Endpoint> endpoints = parse_urls(o.addresses);
  if (endpoints.front().kind != SocketKind::kPush) return false;
  return std::any_of(endpoints.begin(), endpoints.end(), [](const Endpoint& e) {
    return e.address.starts_with("tcp://") || e.address.starts_with("ipc://");
  });
}

PublisherOptions publisher_options_of(const ImageServerOptions& o, const SampleSource& source, const ServerLog& log,
                                      std::uint64_t memory_limit) {
  PublisherOptions p;
  p.confirm = confirms_delivery(o);
  p.delivery.window_bytes = std::max<std::uint64_t>(memory_limit / 2, std::uint64_t{64} << 20);
  p.delivery.log = [&log](std::string_view line) { log.info(std::string(line)); };
  p.wait_for_receiver = o.wait_for_receiver;
  p.metadata = o.format.metadata;
  p.server_id = o.server_id.empty() ? default_server_id() : o.server_id;
  p.identity = stream_identity(o, source);
  p.subscribers = o.subscribers;
  p.report = o.report;
  p.repeat_first_batch = o.repeat_first_batch;
  p.mix = o.mix;
  p.recipe = o.recipe;
  p.wire = o.wire;
  p.wire_threads = o.workers;
  return p;
}

// One run of a server: its parts, and the threads that drive them.
struct Serving {
  Serving(const ImageServerOptions& options, SampleSource& source, const MemoryBudget& budget)
      : options(options),
        source(source),
        log(server_log(options)),
        memory_limit(memory_limit_of(options)),
        counters(log, worker_count(options)),
        queue(queue_capacity(options), budget.queue, [](const Dispatched& d) { return buffered_bytes(*d.sample); }),
        assembler(format_of(options, epoch_size(options, 0)), batch_buffers(options), largest_size(options)),
        connection(options.addresses, connection_options(options)),
        output(assembler, queue),
        stop_requested([this] {
          return stopped.load(std::memory_order_relaxed) || (this->options.should_stop && this->options.should_stop());
        }),
        reader(reader_options_of(options, budget.reader), source, output, counters, log, stop_requested),
        filler_options(filler_options_of(options)),
        publisher(publisher_options_of(options, source, log, memory_limit), connection, counters, stop_requested) {}

  int run();
  void say_start() const;
  void say_undelivered(const DeliveryOutcome& delivery) const;
  std::unique_ptr<metrics::MetricsServer> start_metrics();
  // Ends reading and decoding: the reader's and workers' waits return.
  void halt() {
    queue.close();
    assembler.cancel();
  }

  const ImageServerOptions& options;
  SampleSource& source;
  ServerLog log;
  std::uint64_t memory_limit;
  ServerCounters counters;
  BoundedQueue<Dispatched> queue;
  BatchAssembler assembler;
  Connection connection;
  AssemblerOutput output;
  std::atomic<bool> stopped{false};  // should_stop said so (set by the watcher)
  std::function<bool()> stop_requested;
  EpochReader reader;
  FillerOptions filler_options;
  BatchPublisher publisher;
};

void Serving::say_start() const {
  std::string line = std::to_string(source.units()) + " " + source.unit_name() + ", " +
                     std::to_string(options.workers) + " workers, batches of " +
                     std::to_string(options.format.batch_size) + " on " + connection.describe();
  for (const std::string& bound : connection.bound_addresses()) line += " [bound " + bound + "]";
  log.info(line);
  if (!options.seed_given) {
    const bool from_token = !options.resume_path.empty() && options.resume.stream_found;
    log.info("seed " + std::to_string(options.order.seed) + (from_token ? " (the resume token's" : " (drawn") +
             "; --seed " + std::to_string(options.order.seed) + " makes this stream again)");
  }
}

std::unique_ptr<metrics::MetricsServer> Serving::start_metrics() {
  if (options.metrics_address.empty()) return nullptr;
  auto server = std::make_unique<metrics::MetricsServer>(options.metrics_address, [this](metrics::MetricsText& out) {
    counters.write_metrics(out, {queue.size(), assembler.ready_batches()});
  });
  log.info("metrics: " + server->url());
  return server;
}

int Serving::run() {
  say_start();
  const std::unique_ptr<metrics::MetricsServer> metrics = start_metrics();
  const auto start = std::chrono::steady_clock::now();
  std::thread reading([this] {
    reader.read_all();
    queue.close();
  });
  std::vector<std::thread> workers;
  for (std::size_t i = 0; i < worker_count(options); ++i) {
    workers.emplace_back([this, i] {
      SlotFiller filler(filler_options, assembler, source, counters, counters.worker_clocks(i));
      while (auto dispatched = queue.pop()) filler.serve(*dispatched);
    });
  }
  std::thread finisher([&] {
    reading.join();
    for (auto& w : workers) w.join();
    assembler.finish();
  });
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    // Signals cannot wake condition variables: look for them here.
    while (!done && !stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done) {
      stopped = true;
      halt();
    }
  });
  auto join_all = [&] {
    done = true;
    halt();
    finisher.join();
    watcher.join();
  };
  try {
    publisher.publish(assembler, [this] { halt(); });
  } catch (...) {
    join_all();
    throw;
  }
  join_all();
  const DeliveryOutcome delivery = publisher.settle(options.delivery_timeout);
  if (stop_requested()) shorten_linger_for_stop(connection);
  const bool complete = delivery.counts.unconfirmed == 0 || stop_requested();
  counters.summary(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), connection,
                   delivery_note(delivery), complete);
  if (!complete) say_undelivered(delivery);
  if (metrics) metrics::hold_for_scrapes(options.metrics_hold_s, options.should_stop);
  if (reader.failed()) return 1;
  return complete ? 0 : kExitUndelivered;
}

void Serving::say_undelivered(const DeliveryOutcome& delivery) const {
  std::string places;
  for (const BatchPlace& place : delivery.unconfirmed) {
    places += (places.empty() ? "" : ", ") + std::to_string(place.epoch) + "/" + std::to_string(place.index);
  }
  log.warn(std::to_string(delivery.counts.unconfirmed) + " of " + std::to_string(delivery.counts.sent) +
           " batches reached no receiver that confirmed them within " +
           std::to_string(options.delivery_timeout.count() / 1000) + " s (--delivery-timeout); epoch/batch: " + places +
           (delivery.counts.unconfirmed > delivery.unconfirmed.size() ? ", ..." : ""));
}

// A server whose seed was drawn resumes with the seed its token recorded
// for its stream (or keeps the drawn one for a stream the token lacks).
std::uint64_t token_seed(const ImageServerOptions& o, const SampleSource& source) {
  StreamIdentity identity = stream_identity(o, source);
  identity.seed_from_token = true;
  const StreamResume found = read_resume_token(o.resume_path, identity);
  return found.stream_found ? found.seed : o.order.seed;
}

void say_resume(const ImageServerOptions& o, const ServerLog& log) {
  std::string line = "resuming from " + o.resume_path + " at epoch " + std::to_string(o.resume.first_epoch);
  if (!o.resume.stream_found) line += " (the token names no stream " + stream_name(o) + ": nothing of it consumed)";
  log.info(line);
}

}  // namespace

std::string stream_name(const ImageServerOptions& o) {
  if (!o.stream.empty()) return o.stream;
  return std::to_string(o.order.rank) + "/" + std::to_string(std::max<std::size_t>(o.order.world, 1));
}

StreamIdentity stream_identity(const ImageServerOptions& o, const SampleSource& source) {
  StreamRecipe recipe;
  recipe.seed = o.order.seed;
  recipe.rank = o.order.rank;
  recipe.world = std::max<std::size_t>(o.order.world, 1);
  recipe.batch_size = o.format.batch_size;
  recipe.epoch_batches = o.epoch_batches;
  recipe.shuffle_buffer = o.shuffle_buffer;
  recipe.shuffle_units = o.order.shuffle_units;
  recipe.with_replacement = o.order.with_replacement;
  recipe.repeats = o.order.repeats;
  for (std::size_t i = 0; i < source.units(); ++i) recipe.units.push_back(source.unit_label(i));
  return {stream_name(o), stream_fingerprint(recipe), o.order.seed, o.epoch_batches};
}

std::uint64_t default_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  const std::uint64_t physical = pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : 0;
  return std::clamp<std::uint64_t>(physical / 8, std::uint64_t{64} << 20, std::uint64_t{4} << 30);
}

std::uint64_t memory_limit_of(const ImageServerOptions& options) {
  return options.memory_limit ? options.memory_limit : default_memory_limit();
}

void fit_images_to_memory(ImageServerOptions& options) {
  const std::uint64_t fits =
      memory_budget(memory_limit_of(options), options.max_image_bytes, worker_count(options), options.read_ahead).image;
  if (fits >= options.max_image_bytes) return;
  options.max_image_bytes = fits;
  options.image_bytes_fit_memory = true;
}

bool has_remote_units(const SampleSource& source) {
  for (std::size_t unit = 0; unit < source.units(); ++unit) {
    if (source.is_remote(unit)) return true;
  }
  return false;
}

std::uint64_t repeated_epoch_samples(const ImageServerOptions& o, const SampleSource& source) {
  if (o.order.repeats <= 1 || o.epoch_batches > 0) return 0;
  std::uint64_t samples = o.dataset_samples;
  if (samples == 0 && std::string_view(source.unit_name()) == "images") samples = source.units();
  if (samples == 0) {
    throw ArgumentError("--ra-reps over " + std::string(source.unit_name()) +
                        " needs --dataset-samples N (the samples in all of them) or --epoch-batches: an epoch's "
                        "length is counted in samples");
  }
  const std::uint64_t world = std::max<std::uint64_t>(o.order.world, 1);
  const std::uint64_t share =
      o.ra_round == 0 ? (samples + world - 1) / world : samples / o.ra_round * o.ra_round / world;
  if (share == 0) {
    throw ArgumentError("--ra-reps: " + std::to_string(samples) + " samples rounded down to a multiple of --ra-round " +
                        std::to_string(o.ra_round) + " leave no sample for each of " + std::to_string(world) +
                        " ranks (--ra-round 0 does not round)");
  }
  return share;
}

int run_image_server(const ImageServerOptions& options, SampleSource& source) {
  if (source.units() == 0) throw ArgumentError(std::string("nothing to serve: no ") + source.unit_name());
  if (options.addresses.empty()) throw ArgumentError("nothing to serve on: no address");
  if (options.subscribers && parse_urls(options.addresses).front().kind != SocketKind::kPub) {
    throw ArgumentError("--subscribers counts PUB subscribers: serve on zpub:// or zrpub://, not " +
                        options.addresses.front());
  }
  imaging::configure_opencv_for_workers();
  ImageServerOptions resolved = options;
  if (!options.resume_path.empty()) {
    if (!options.seed_given) resolved.order.seed = token_seed(options, source);
    resolved.resume = read_resume_token(options.resume_path, stream_identity(resolved, source));
    say_resume(resolved, server_log(resolved));
  }

  resolved.epoch_samples = repeated_epoch_samples(resolved, source);
  const std::size_t read_ahead = has_remote_units(source) ? resolved.read_ahead : 0;
  const MemoryBudget budget =
      memory_budget(memory_limit_of(resolved), resolved.max_image_bytes, worker_count(resolved), read_ahead);
  // Declared before the serving that reads through it: it ends after.
  std::optional<ReadAheadSource> ahead;
  if (read_ahead > 0) ahead.emplace(source, ReadAheadSource::Options{read_ahead, budget.read_ahead});
  Serving serving(resolved, ahead ? *ahead : source, budget);
  return serving.run();
}

}  // namespace tensorcom::pipeline
