#include "image_server.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "batch_assembler.h"
#include "bounded_queue.h"
#include "sample_label.h"
#include "skip_counter.h"
#include "stage_clock.h"
#include "tensorcom/formats/printable.h"
#include "tensorcom/metadata.h"
#include "tensorcom/metrics/metrics_server.h"
#include "tensorcom/metrics/sender_metrics.h"
#include "tensorcom/url.h"

namespace tensorcom::pipeline {

namespace {

std::string default_server_id() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(::getpid());
}

// The process's peak resident memory so far.
std::uint64_t peak_memory_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) / 1024;  // kilobytes on Linux
}

using Clock = std::chrono::steady_clock;
constexpr auto kRelaxed = std::memory_order_relaxed;

// Samples handed to the workers and not yet done with (committed, abandoned
// or skipped). At zero no worker holds a batch slot and none waits in the
// queue: the point where an epoch's batches can be closed. Thread-safe.
class InFlight {
 public:
  void add() {
    std::lock_guard lock(mutex_);
    ++count_;
  }
  void done() {
    std::lock_guard lock(mutex_);
    if (--count_ == 0) zero_.notify_all();
  }
  // Blocks until the count is zero; false if `stopped` says so first
  // (looked at every 50 ms: a stopped pipeline may never reach zero).
  template <class Stopped>
  bool wait_zero(Stopped stopped) {
    std::unique_lock lock(mutex_);
    while (count_ != 0) {
      if (stopped()) return false;
      zero_.wait_for(lock, std::chrono::milliseconds(50));
    }
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable zero_;
  std::uint64_t count_ = 0;
};

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

class ImageServer {
 public:
  ImageServer(const ImageServerOptions& options, SampleSource& source)
      : options_(options),
        source_(source),
        memory_limit_(options.memory_limit ? options.memory_limit : default_memory_limit()),
        queue_(4 * static_cast<std::size_t>(std::max(options.workers, 1)) + options.format.batch_size,
               memory_limit_ / 4, buffered_bytes),
        assembler_(format_of(options, epoch_size(options, 0)), batch_buffers(options), largest_size(options)),
        skips_(options.program),
        server_id_(options.server_id.empty() ? default_server_id() : options.server_id),
        connection_(options.addresses, connection_options(options)),
        worker_clocks_(std::make_unique<WorkerClocks[]>(worker_count())) {}

  int run();

 private:
  static ConnectionOptions connection_options(const ImageServerOptions& o) {
    ConnectionOptions c = o.connection;
    if (o.subscribers) c.publish_no_drop = true;  // every subscriber gets every batch
    return c;
  }

  static std::size_t batch_buffers(const ImageServerOptions& o) {
    if (o.max_batches) return o.max_batches;
    // Batches being filled by the workers, one ready, one being sent. What
    // ZeroMQ still holds once sent is bounded per peer by its high-water mark.
    std::size_t in_flight = 2 + 2 * static_cast<std::size_t>(o.workers) / o.format.batch_size;
    return std::max<std::size_t>(in_flight + 2, 4);
  }

  [[nodiscard]] std::size_t worker_count() const { return static_cast<std::size_t>(std::max(options_.workers, 1)); }

  bool stop_requested() const {
    return stop_.load(std::memory_order_relaxed) || (options_.should_stop && options_.should_stop());
  }

  void read_all();
  bool start_epoch(std::uint64_t epoch);
  bool read_unit(std::size_t unit, ShuffleBuffer<RawSample>& buffer, EpochQuota& quota);
  void say_quota(std::uint64_t epoch, const EpochQuota& quota, std::size_t passes) const;
  bool await_subscribers();
  bool emit(RawSample sample);
  void clock_reading();  // adds the reader's time since read_mark_ to the read stage
  void work(std::size_t worker);
  // Makes the augmenter's output size x size (a new epoch's size).
  void resize(imaging::ImageAugmenter& augmenter, int size);
  void count_jpegs(const imaging::ImageAugmenter& augmenter);
  // The sample's label, or nothing when it is skipped (counted).
  [[nodiscard]] std::optional<std::int32_t> admit(const RawSample& sample);
  // Decodes and augments the sample into the next batch slot, or skips it.
  void augment_into_batch(imaging::ImageAugmenter& augmenter, RawSample& sample, std::int32_t label,
                          std::vector<std::uint8_t>& scratch, WorkerClocks& clocks);
  void publish();
  void repeat(const TensorList& batch);
  bool send(const TensorList& batch);
  bool send_counted(const TensorList& batch);
  void report() const;
  void summary(double seconds) const;
  void write_metrics(metrics::MetricsText& out);
  [[nodiscard]] std::unique_ptr<metrics::MetricsServer> start_metrics();

  const ImageServerOptions& options_;
  SampleSource& source_;
  std::uint64_t memory_limit_;
  BoundedQueue<RawSample> queue_;
  BatchAssembler assembler_;
  SkipCounter skips_;
  std::string server_id_;
  Connection connection_;
  std::uint64_t sequence_ = 0;       // samples emitted; reader thread only
  std::uint64_t reading_epoch_ = 0;  // the epoch being read; reader thread only
  InFlight in_flight_;
  std::atomic<std::uint64_t> shard_errors_{0};
  std::atomic<std::uint64_t> jpegs_sliced_{0};  // added by each worker as it ends
  std::atomic<std::uint64_t> jpegs_total_{0};
  std::atomic<bool> failed_{false};                // the data held nothing to serve
  std::atomic<bool> stop_{false};                  // should_stop said so (set by the watcher)
  metrics::SenderMetrics sent_;                    // batches and samples sent, time blocked sending
  StageClock read_clock_;                          // the reader's time, less its waits for room in the queue
  Clock::time_point read_mark_{};                  // reader thread: when its current stretch of reading began
  std::unique_ptr<WorkerClocks[]> worker_clocks_;  // one per worker
};

void ImageServer::read_all() {
  for (std::uint64_t epoch = 0; options_.epochs == 0 || epoch < options_.epochs; ++epoch) {
    if (!start_epoch(epoch)) return;
    const std::uint64_t epoch_start = sequence_;
    ShuffleBuffer<RawSample> buffer(options_.shuffle_buffer, seeded_rng({options_.order.seed, epoch, 3}),
                                    memory_limit_ / 4 * 3, buffered_bytes);
    EpochQuota quota(options_.epoch_batches * options_.format.batch_size);
    const std::vector<std::size_t> units = epoch_units(source_.units(), epoch, options_.order);
    std::size_t passes = 0;
    for (bool again = true; again; ++passes) {
      const std::uint64_t taken_before = quota.taken();
      for (std::size_t unit : units) {
        if (!read_unit(unit, buffer, quota)) return;
        if (quota.full()) break;
      }
      again = quota.another_pass(taken_before);
    }
    // An epoch ends with all of its samples out: none is carried over.
    while (auto sample = buffer.drain()) {
      if (!emit(std::move(*sample))) return;
    }
    if (sequence_ == epoch_start) {
      // Serving forever from nothing would only spin.
      std::cerr << options_.program << ": epoch " << epoch << " found no samples; stopping\n";
      failed_ = true;
      return;
    }
    if (options_.epoch_batches) say_quota(epoch, quota, passes);
  }
}

// With a size schedule, an epoch's batches end with it: every sample of the
// epoch before is done and its partly filled batches are sent (the last one
// short) before this epoch's first sample, and then this epoch's size
// applies. The workers idle meanwhile, for about one image's work, once an
// epoch. False when serving is stopped.
bool ImageServer::start_epoch(std::uint64_t epoch) {
  reading_epoch_ = epoch;
  if (!options_.size_schedule) return true;
  const int size = epoch_size(options_, epoch);
  if (epoch > 0) {
    if (!in_flight_.wait_zero([this] { return stop_requested(); })) return false;
    assembler_.flush();
    if (size == assembler_.format().size) return true;
    assembler_.set_size(size);
  }
  std::cout << options_.program << ": epoch " << epoch << ": size " << size << " (--size-schedule)" << std::endl;
  return true;
}

void ImageServer::say_quota(std::uint64_t epoch, const EpochQuota& quota, std::size_t passes) const {
  if (passes > 1) {
    std::cout << options_.program << ": epoch " << epoch << ": the share was read " << passes
              << " times to fill --epoch-batches " << options_.epoch_batches << " (" << quota.taken()
              << " samples): its first samples were repeated" << std::endl;
  } else if (quota.cut()) {
    std::cout << options_.program << ": epoch " << epoch << ": --epoch-batches " << options_.epoch_batches
              << " filled after " << quota.taken() << " samples; the rest of the share is left out this epoch"
              << std::endl;
  }
}

bool ImageServer::read_unit(std::size_t unit, ShuffleBuffer<RawSample>& buffer, EpochQuota& quota) {
  bool stopped = false;
  auto pass_on = [&](RawSample sample) {
    if (!quota.take()) return false;
    auto out = buffer.add(std::move(sample));
    stopped = stop_requested() || (out && !emit(std::move(*out)));
    while (!stopped) {
      auto excess = buffer.take_excess();
      if (!excess) break;
      stopped = !emit(std::move(*excess));
    }
    return !stopped;
  };
  std::optional<std::string> problem;
  read_mark_ = Clock::now();
  try {
    problem = source_.read(unit, pass_on);
  } catch (const std::bad_alloc&) {
    // One shard's failure ends that shard only; what it gave is served.
    problem = source_.unit_label(unit) + " abandoned: out of memory while reading it";
  } catch (const std::exception& e) {
    problem = source_.unit_label(unit) + " abandoned: " + e.what();
  }
  clock_reading();
  if (problem) {
    ++shard_errors_;
    std::cerr << options_.program << ": " << formats::printable(*problem) << '\n';
  }
  return !stopped && !stop_requested();
}

void ImageServer::clock_reading() {
  const Clock::time_point now = Clock::now();
  read_clock_.add(now - read_mark_);
  read_mark_ = now;
}

bool ImageServer::emit(RawSample sample) {
  sample.sequence = sequence_++;
  sample.epoch = reading_epoch_;
  // Waiting for the workers is not reading: the clock pauses while pushing.
  clock_reading();
  in_flight_.add();
  const bool taken = queue_.push(std::move(sample));
  if (!taken) in_flight_.done();
  read_mark_ = Clock::now();
  return taken;
}

std::optional<std::int32_t> ImageServer::admit(const RawSample& sample) {
  using imaging::Problem;
  if (sample.unreadable) {
    skips_.skip(Problem::kUnreadableFile, sample.key, sample.shard, *sample.unreadable);
    return std::nullopt;
  }
  if (sample.oversized_image) {
    skips_.skip(Problem::kTooLarge, sample.key, sample.shard,
                "image of " + std::to_string(sample.oversized_image) + " bytes; the limit is " +
                    std::to_string(options_.max_image_bytes));
    return std::nullopt;
  }
  const Label label = label_of(sample, options_.classes);
  if (label.problem) {
    skips_.skip(*label.problem, sample.key, sample.shard, label.detail);
    return std::nullopt;
  }
  if (!sample.image || sample.image->empty()) {
    skips_.skip(sample.image ? Problem::kEmpty : Problem::kNoImage, sample.key, sample.shard, "");
    return std::nullopt;
  }
  return label.value;
}

void ImageServer::augment_into_batch(imaging::ImageAugmenter& augmenter, RawSample& sample, std::int32_t label,
                                     std::vector<std::uint8_t>& scratch, WorkerClocks& clocks) {
  auto slot = assembler_.acquire();
  if (!slot) return;  // cancelled
  auto rng = sample_rng(options_.order.seed, sample.sequence);
  const Clock::time_point start = Clock::now();
  const Clock::duration decoded_before = augmenter.decode_time();
  // Timed whether the sample is kept or not: a bad image costs time too.
  auto time_sample = [&] {
    const Clock::duration decoding = augmenter.decode_time() - decoded_before;
    clocks.decode.add(decoding);
    clocks.augment.add(Clock::now() - start - decoding);
  };
  try {
    augmenter.augment(*sample.image, rng, slot->direct ? slot->direct : scratch.data());
    assembler_.commit(*slot, scratch.data(), label, std::move(sample.key), std::move(sample.shard),
                      augmenter.last_geometry(), sample.epoch);
    time_sample();
  } catch (const imaging::ImageError& e) {
    time_sample();
    assembler_.abandon(*slot);
    skips_.skip(e.problem(), sample.key, sample.shard, e.what());
  } catch (const std::exception& e) {
    time_sample();
    assembler_.abandon(*slot);
    skips_.skip(imaging::Problem::kUndecodable, sample.key, sample.shard, e.what());
  }
}

void ImageServer::work(std::size_t worker) {
  imaging::ImageAugmenter augmenter(options_.augment, epoch_size(options_, 0));
  const BatchFormat largest = format_of(options_, largest_size(options_));
  std::vector<std::uint8_t> scratch(largest.direct() ? 0 : largest.image_bytes());
  while (auto sample = queue_.pop()) {
    resize(augmenter, epoch_size(options_, sample->epoch));
    if (const auto label = admit(*sample)) {
      augment_into_batch(augmenter, *sample, *label, scratch, worker_clocks_[worker]);
    }
    in_flight_.done();
  }
  count_jpegs(augmenter);
}

void ImageServer::resize(imaging::ImageAugmenter& augmenter, int size) {
  if (augmenter.output().width == size) return;
  count_jpegs(augmenter);  // a new augmenter counts from zero
  augmenter = imaging::ImageAugmenter(options_.augment, size);
}

void ImageServer::count_jpegs(const imaging::ImageAugmenter& augmenter) {
  jpegs_sliced_ += augmenter.jpeg_counts().sliced;
  jpegs_total_ += augmenter.jpeg_counts().total;
}

bool ImageServer::await_subscribers() {
  // Before the first batch, all of --subscribers: one that joined later
  // would miss the start of the epoch. After it, any one.
  const std::uint64_t needed = sent_.batches() == 0 ? options_.subscribers : 0;
  for (;;) {
    if (connection_.wait_for_subscriber(Milliseconds(50)) && (needed <= 1 || connection_.subscribers() >= needed)) {
      sent_.set_subscribers(connection_.subscribers());
      return true;
    }
    sent_.set_subscribers(connection_.subscribers());
    if (stop_requested()) return false;
    if (needed > 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool ImageServer::send(const TensorList& batch) {
  const Clock::time_point start = Clock::now();
  try {
    // Nobody listening: wait rather than decode for nobody (PUB would drop
    // every batch), looking for a stop request between waits.
    if (!await_subscribers()) return false;
    connection_.send(batch);
    sent_.add_send_blocked(Clock::now() - start);
    return true;
  } catch (const TransportError& e) {
    if (e.code() == EINTR && stop_requested()) return false;
    throw;
  }
}

// Sends the batch and counts it; false when serving ends.
bool ImageServer::send_counted(const TensorList& batch) {
  if (!send(batch)) return false;
  sent_.sent(static_cast<std::uint64_t>(batch[1].dim(0)), batch_bytes(batch));
  if (options_.report && sent_.batches() % options_.report == 0) report();
  return true;
}

void ImageServer::publish() {
  while (auto batch = assembler_.next_ready()) {
    TensorList list{batch->images, batch->labels};
    if (options_.format.metadata) {
      list.push_back(
          metadata_tensor({std::move(batch->keys), std::move(batch->shards), server_id_, sent_.batches(),
                           std::move(batch->geometry), batch->epoch, static_cast<std::uint32_t>(batch->size)}));
    }
    if (!send_counted(list)) return;
    if (options_.repeat_first_batch) return repeat(list);
  }
}

// The reader and workers are stopped first, so that decoding takes no CPU
// from sending: what is measured is the transport alone.
void ImageServer::repeat(const TensorList& batch) {
  queue_.close();
  assembler_.cancel();
  while (!stop_requested() && send_counted(batch)) {
  }
}

void ImageServer::report() const {
  std::cout << options_.program << ": " << sent_.batches() << " batches, " << sent_.samples() << " images; "
            << connection_.stats().summary() << "; skipped " << skips_.total() << std::endl;
}

void ImageServer::summary(double seconds) const {
  const std::uint64_t samples = sent_.samples();
  std::cout << options_.program << ": done: served " << samples << " samples in " << sent_.batches() << " batches in "
            << seconds << " s (" << (seconds > 0 ? static_cast<double>(samples) / seconds : 0.0)
            << " images/s); skipped: " << skips_.summary() << "; shard errors: " << shard_errors_
            << "; JPEGs cut at restart markers: " << jpegs_sliced_ << " of " << jpegs_total_
            << "; peak memory: " << peak_memory_mib() << " MiB" << std::endl;
  // Most of a crop's decoding time is entropy decoding of rows it does not
  // need; restart markers let the server skip it. Say how to get them.
  if (jpegs_total_ > 0 && jpegs_sliced_ * 2 < jpegs_total_) {
    std::cout << options_.program << ": hint: most JPEGs had no restart markers to cut crops at; "
              << "'make-shards --from-shards PATTERN --restart-markers' rewrites shards losslessly "
              << "so that crops decode faster" << std::endl;
  }
}

int ImageServer::run() {
  std::cout << options_.program << ": " << source_.units() << " " << source_.unit_name() << ", " << options_.workers
            << " workers, batches of " << options_.format.batch_size << " on " << connection_.describe();
  for (const std::string& bound : connection_.bound_addresses()) std::cout << " [bound " << bound << "]";
  std::cout << std::endl;
  const std::unique_ptr<metrics::MetricsServer> metrics = start_metrics();

  const auto start = std::chrono::steady_clock::now();
  std::thread reader([this] {
    read_all();
    queue_.close();
  });
  std::vector<std::thread> workers;
  for (std::size_t i = 0; i < worker_count(); ++i) workers.emplace_back([this, i] { work(i); });
  std::thread finisher([&] {
    reader.join();
    for (auto& w : workers) w.join();
    assembler_.finish();
  });
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    // Signals cannot wake condition variables: look for them here.
    while (!done && !stop_requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!done) {
      stop_ = true;
      queue_.close();
      assembler_.cancel();
    }
  });
  auto stop_threads = [&] {
    done = true;
    queue_.close();
    assembler_.cancel();
    finisher.join();
    watcher.join();
  };
  try {
    publish();
  } catch (...) {
    stop_threads();
    throw;
  }
  stop_threads();
  summary(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (metrics) metrics::hold_for_scrapes(options_.metrics_hold_s, options_.should_stop);
  return failed_ ? 1 : 0;
}

std::unique_ptr<metrics::MetricsServer> ImageServer::start_metrics() {
  if (options_.metrics_address.empty()) return nullptr;
  auto server = std::make_unique<metrics::MetricsServer>(options_.metrics_address,
                                                         [this](metrics::MetricsText& out) { write_metrics(out); });
  std::cout << options_.program << ": metrics: " << server->url() << std::endl;
  return server;
}

// On the metrics server's thread: reads atomics, and takes the queue's,
// the assembler's and the skip counter's locks briefly.
void ImageServer::write_metrics(metrics::MetricsText& out) {
  Clock::rep decode = 0, augment = 0;
  for (std::size_t i = 0; i < worker_count(); ++i) {
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
  out.counter("tensorcom_server_shard_errors_total", "Shards (or files) abandoned part way for an error.",
              shard_errors_.load(kRelaxed));
  out.family("tensorcom_server_queue_depth", metrics::MetricType::kGauge,
             "Items waiting now: encoded samples for a worker (decode), full batches for sending (send).");
  out.sample(static_cast<double>(queue_.size()), {{"queue", "decode"}});
  out.sample(static_cast<double>(assembler_.ready_batches()), {{"queue", "send"}});
  out.gauge("tensorcom_server_workers", "Decoding threads: the most decode + augment seconds a second can take.",
            static_cast<double>(worker_count()));
}

}  // namespace

std::uint64_t default_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  const std::uint64_t physical = pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : 0;
  return std::clamp<std::uint64_t>(physical / 8, std::uint64_t{64} << 20, std::uint64_t{4} << 30);
}

int run_image_server(const ImageServerOptions& options, SampleSource& source) {
  if (source.units() == 0) throw ArgumentError(std::string("nothing to serve: no ") + source.unit_name());
  if (options.addresses.empty()) throw ArgumentError("nothing to serve on: no address");
  if (options.subscribers && parse_urls(options.addresses).front().kind != SocketKind::kPub) {
    throw ArgumentError("--subscribers counts PUB subscribers: serve on zpub:// or zrpub://, not " +
                        options.addresses.front());
  }
  imaging::configure_opencv_for_workers();
  ImageServer server(options, source);
  return server.run();
}

}  // namespace tensorcom::pipeline
