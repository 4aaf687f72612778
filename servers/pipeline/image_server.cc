#include "image_server.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <iostream>
#include <mutex>
#include <thread>
#include <variant>

#include "batch_assembler.h"
#include "bounded_queue.h"
#include "sample_window.h"
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
        queue_(queue_capacity(options), memory_limit_ / 4,
               [](const Dispatched& d) { return buffered_bytes(*d.sample); }),
        assembler_(format_of(options, epoch_size(options, 0)), batch_buffers(options), largest_size(options)),
        skips_(options.program),
        server_id_(options.server_id.empty() ? default_server_id() : options.server_id),
        identity_(stream_identity(options, source)),
        connection_(options.addresses, connection_options(options)),
        held_back_(memory_limit_ / 8),
        handed_over_(memory_limit_ / 8),
        worker_clocks_(std::make_unique<WorkerClocks[]>(worker_count())) {}
  ImageServer(const ImageServer&) = delete;
  ImageServer& operator=(const ImageServer&) = delete;

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

  static std::size_t queue_capacity(const ImageServerOptions& o) {
    return 4 * static_cast<std::size_t>(std::max(o.workers, 1)) + o.format.batch_size;
  }

  [[nodiscard]] std::size_t worker_count() const { return static_cast<std::size_t>(std::max(options_.workers, 1)); }
  [[nodiscard]] std::uint64_t batch_size() const { return options_.format.batch_size; }

  bool stop_requested() const {
    return stop_.load(std::memory_order_relaxed) || (options_.should_stop && options_.should_stop());
  }

  // Why a sample cannot be served.
  struct Refusal {
    imaging::Problem problem;
    std::string detail;
  };
  struct WorkerState {
    imaging::ImageAugmenter augmenter;
    std::vector<std::uint8_t> scratch;
    WorkerClocks& clocks;
    ByteBuffer later{};  // the image a resumed epoch left for this worker to read
  };

  void read_all();
  bool read_epoch(std::uint64_t epoch);
  void say_size(std::uint64_t epoch);
  bool read_unit(std::size_t unit, ShuffleBuffer<RawSample>& buffer, EpochQuota& quota);
  void say_quota(std::uint64_t epoch, const EpochQuota& quota, std::size_t passes) const;
  void say_resumed(std::uint64_t epoch) const;
  bool await_subscribers();
  bool enough_subscribing_peers(std::uint64_t needed);
  bool place(RawSample sample);
  bool dispatch(bool last);
  void clock_reading();  // adds the reader's time since read_mark_ to the read stage
  void work(std::size_t worker);
  // The bytes of an image listed unread with its offset (a resumed epoch's). Throws IoError.
  const ByteBuffer& read_later(const RawSample& sample, WorkerState& worker) const;
  // Makes the augmenter's output size x size (a new epoch's size).
  void resize(imaging::ImageAugmenter& augmenter, int size);
  void count_jpegs(const imaging::ImageAugmenter& augmenter);
  // The sample's label, or why it cannot be served.
  [[nodiscard]] std::variant<std::int32_t, Refusal> label_of_sample(const RawSample& sample) const;
  // Fills the sample's batch slot from it or, when it cannot be served, from
  // its nearest neighbour in the epoch's order that can.
  void serve(const Dispatched& dispatched, WorkerState& worker);
  // Decodes and augments `sample` into `slot` with the slot's random draws;
  // why not, if it cannot.
  std::optional<Refusal> fill(const SampleSlot& slot, const RawSample& sample, WorkerState& worker);
  void publish();
  [[nodiscard]] BatchMetadata metadata_of(AssembledBatch& batch) const;
  void repeat(const TensorList& batch);
  bool send(const TensorList& batch);
  bool send_counted(const TensorList& batch);
  void report() const;
  void summary(double seconds) const;
  [[nodiscard]] std::string replaced_summary() const;
  void write_metrics(metrics::MetricsText& out);
  [[nodiscard]] std::unique_ptr<metrics::MetricsServer> start_metrics();

  const ImageServerOptions& options_;
  SampleSource& source_;
  std::uint64_t memory_limit_;
  BoundedQueue<Dispatched> queue_;
  BatchAssembler assembler_;
  SkipCounter skips_;
  std::string server_id_;
  StreamIdentity identity_;
  Connection connection_;
  // Reader thread only: the epoch being read, its samples placed so far, the
  // samples read and not yet handed to the workers (so that a failed
  // sample's replacements are read before it is decoded) and the last ones
  // handed over (replacements for those at the epoch's end); each within
  // kWindow samples and window_bytes_.
  std::uint64_t reading_epoch_ = 0;
  std::uint64_t placed_ = 0;
  bool images_later_ = false;  // replaying: images are read by the workers that decode them
  SampleWindow held_back_;
  SampleWindow handed_over_;
  int last_size_ = 0;
  std::atomic<std::uint64_t> replayed_{0};  // samples not served: their batch was consumed before a resume
  mutable std::mutex replaced_mutex_;
  SkipCounter::Counts replaced_{};          // samples replaced by a neighbour, by why
  std::atomic<std::uint64_t> unfilled_{0};  // slots nothing could fill
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
  for (std::uint64_t epoch = options_.resume.first_epoch; options_.epochs == 0 || epoch < options_.epochs; ++epoch) {
    if (!read_epoch(epoch)) return;
  }
}

// One pass over the epoch's order: every sample placed and dispatched. A
// resumed epoch lists its images where they lie instead of reading them:
// the consumed batches' samples are placed and never read, the others read
// by the worker that decodes them (a compressed or streamed shard, whose
// images cannot be found again, is read as usual; its consumed samples are
// still not decoded).
bool ImageServer::read_epoch(std::uint64_t epoch) {
  say_size(epoch);
  images_later_ = options_.resume.consumed_batches(epoch) > 0;
  reading_epoch_ = epoch;
  placed_ = 0;
  ShuffleBuffer<RawSample> buffer(options_.shuffle_buffer, seeded_rng({options_.order.seed, epoch, 3}),
                                  memory_limit_ / 4 * 3, buffered_bytes);
  EpochQuota quota(options_.epoch_batches * options_.format.batch_size);
  const std::vector<std::size_t> units = epoch_units(source_.units(), epoch, options_.order);
  std::size_t passes = 0;
  for (bool again = true; again; ++passes) {
    const std::uint64_t taken_before = quota.taken();
    for (std::size_t unit : units) {
      if (!read_unit(unit, buffer, quota)) return false;
      if (quota.full()) break;
    }
    again = quota.another_pass(taken_before);
  }
  // An epoch ends with all of its samples out: none is carried over.
  while (auto sample = buffer.drain()) {
    if (!place(std::move(*sample))) return false;
  }
  if (placed_ == 0) {
    // Serving forever from nothing would only spin.
    std::cerr << options_.program << ": epoch " << epoch << " found no samples; stopping\n";
    failed_ = true;
    return false;
  }
  while (!held_back_.empty()) {
    if (!dispatch(held_back_.samples().size() == 1)) return false;
  }
  handed_over_.clear();
  if (options_.epoch_batches) say_quota(epoch, quota, passes);
  say_resumed(epoch);
  images_later_ = false;
  return true;
}

void ImageServer::say_size(std::uint64_t epoch) {
  const int size = epoch_size(options_, epoch);
  if (options_.size_schedule && size != last_size_) {
    std::cout << options_.program << ": epoch " << epoch << ": size " << size << " (--size-schedule)" << std::endl;
  }
  last_size_ = size;
}

void ImageServer::say_resumed(std::uint64_t epoch) const {
  const std::uint64_t skipped = options_.resume.consumed_batches(epoch);
  if (skipped == 0) return;
  std::cout << options_.program << ": epoch " << epoch << ": resumed: " << skipped
            << " batches consumed before the resume were passed over, not decoded" << std::endl;
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
    sample.unit = unit;
    if (!quota.take()) return false;
    auto out = buffer.add(std::move(sample));
    stopped = stop_requested() || (out && !place(std::move(*out)));
    while (!stopped) {
      auto excess = buffer.take_excess();
      if (!excess) break;
      stopped = !place(std::move(*excess));
    }
    return !stopped;
  };
  std::optional<std::string> problem;
  read_mark_ = Clock::now();
  try {
    problem = source_.read(unit, pass_on, images_later_);
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

// Gives the sample its place in the epoch's order and holds it back until
// the samples after it are read (its replacements, should it fail).
bool ImageServer::place(RawSample sample) {
  sample.epoch = reading_epoch_;
  sample.position = placed_++;
  // Waiting for the workers is not reading: the clock pauses meanwhile.
  clock_reading();
  held_back_.push(std::make_shared<const RawSample>(std::move(sample)));
  bool ok = true;
  while (ok && held_back_.over()) ok = dispatch(false);
  read_mark_ = Clock::now();
  return ok;
}

// Hands the oldest held-back sample to the workers, opening its batch first
// (unless a resume token says its batch was consumed: then it is not decoded).
bool ImageServer::dispatch(bool last) {
  Dispatched d{held_back_.pop(), {}};
  const BatchPlace place{d.sample->epoch, d.sample->position / batch_size()};
  const std::size_t index = d.sample->position % batch_size();
  const bool consumed = options_.resume.consumed_batch(place.epoch, place.index);
  if (!consumed) {
    const auto& after = held_back_.samples();
    const auto& before = handed_over_.samples();
    d.candidates.assign(after.begin(), after.end());
    d.candidates.insert(d.candidates.end(), before.rbegin(), before.rend());
  }
  handed_over_.push(d.sample);
  while (handed_over_.over()) handed_over_.pop();
  if (consumed) {
    ++replayed_;
    return !stop_requested();
  }
  if (index == 0 && !assembler_.open(place, batch_size(), epoch_size(options_, place.epoch))) return false;
  if (last) assembler_.end_epoch_at(place, index + 1);
  return queue_.push(std::move(d));
}

std::variant<std::int32_t, ImageServer::Refusal> ImageServer::label_of_sample(const RawSample& sample) const {
  using imaging::Problem;
  if (sample.unreadable) return Refusal{Problem::kUnreadableFile, *sample.unreadable};
  if (sample.oversized_image) {
    return Refusal{Problem::kTooLarge, "image of " + std::to_string(sample.oversized_image) + " bytes; the limit is " +
                                           std::to_string(options_.max_image_bytes)};
  }
  const Label label = label_of(sample, options_.classes);
  if (label.problem) return Refusal{*label.problem, label.detail};
  if (!sample.image && !sample.image_offset) return Refusal{Problem::kNoImage, ""};
  if (sample.image ? sample.image->empty() : sample.image_bytes == 0) return Refusal{Problem::kEmpty, ""};
  return label.value;
}

std::optional<ImageServer::Refusal> ImageServer::fill(const SampleSlot& slot, const RawSample& sample,
                                                      WorkerState& worker) {
  const auto label = label_of_sample(sample);
  if (const Refusal* refusal = std::get_if<Refusal>(&label)) return *refusal;
  // The slot's place, not the sample's, draws the crop and flip: a
  // replacement is cut as the sample it replaces would have been.
  const std::uint64_t position = slot.batch.index * batch_size() + slot.index;
  auto rng = sample_rng(options_.order.seed, (slot.batch.epoch << 40) | position);
  imaging::ImageAugmenter& augmenter = worker.augmenter;
  const Clock::time_point start = Clock::now();
  const Clock::duration decoded_before = augmenter.decode_time();
  // Timed whether the sample is kept or not: a bad image costs time too.
  auto time_sample = [&] {
    const Clock::duration decoding = augmenter.decode_time() - decoded_before;
    worker.clocks.decode.add(decoding);
    worker.clocks.augment.add(Clock::now() - start - decoding);
  };
  try {
    augmenter.augment(sample.image ? *sample.image : read_later(sample, worker), rng,
                      slot.direct ? slot.direct : worker.scratch.data());
  } catch (const IoError& e) {
    time_sample();
    return Refusal{imaging::Problem::kUnreadableFile, e.what()};
  } catch (const imaging::ImageError& e) {
    time_sample();
    return Refusal{e.problem(), e.what()};
  } catch (const std::exception& e) {
    time_sample();
    return Refusal{imaging::Problem::kUndecodable, e.what()};
  }
  assembler_.commit(slot, worker.scratch.data(), std::get<std::int32_t>(label), sample.key, sample.shard,
                    augmenter.last_geometry());
  time_sample();
  return std::nullopt;
}

const ByteBuffer& ImageServer::read_later(const RawSample& sample, WorkerState& worker) const {
  worker.later = source_.read_image(sample);
  return worker.later;
}

void ImageServer::serve(const Dispatched& dispatched, WorkerState& worker) {
  const RawSample& sample = *dispatched.sample;
  const SampleSlot slot =
      assembler_.slot({sample.epoch, sample.position / batch_size()}, sample.position % batch_size());
  resize(worker.augmenter, slot.format->size);
  const std::optional<Refusal> refusal = fill(slot, sample, worker);
  if (!refusal) return;
  skips_.skip(refusal->problem, sample.key, sample.shard, refusal->detail);
  for (const SharedSample& candidate : dispatched.candidates) {
    if (fill(slot, *candidate, worker)) continue;
    std::lock_guard lock(replaced_mutex_);
    ++replaced_[static_cast<std::size_t>(refusal->problem)];
    return;
  }
  ++unfilled_;
  std::cerr << options_.program << ": epoch " << sample.epoch << ": none of the " << dispatched.candidates.size()
            << " samples nearest " << formats::printable(sample.key)
            << " could replace it; its batch is sent one short\n";
  assembler_.leave_empty(slot);
}

void ImageServer::work(std::size_t worker) {
  const BatchFormat largest = format_of(options_, largest_size(options_));
  WorkerState state{imaging::ImageAugmenter(options_.augment, epoch_size(options_, 0)),
                    std::vector<std::uint8_t>(largest.direct() ? 0 : largest.image_bytes()), worker_clocks_[worker]};
  while (auto dispatched = queue_.pop()) serve(*dispatched, state);
  count_jpegs(state.augmenter);
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

// A peer counts once the kernel has its subscription's bytes; ZeroMQ
// applies the subscription a moment later. Counted again after a pause, so
// that batch 0 does not go out before the last peer's subscription is in.
bool ImageServer::enough_subscribing_peers(std::uint64_t needed) {
  constexpr std::chrono::milliseconds kSettle{200};
  if (connection_.subscribing_peers() < needed) return false;
  std::this_thread::sleep_for(kSettle);
  return connection_.subscribing_peers() >= needed;
}

bool ImageServer::await_subscribers() {
  // Before the first batch, all of --subscribers: one that joined later
  // would miss the start of the epoch. After it, any one.
  const std::uint64_t needed = sent_.batches() == 0 ? options_.subscribers : 0;
  for (;;) {
    // Counted by peer: one peer holding two subscriptions is one subscriber.
    if (connection_.wait_for_subscriber(Milliseconds(50)) && (needed <= 1 || enough_subscribing_peers(needed))) {
      sent_.set_subscribers(connection_.subscribing_peers());
      return true;
    }
    sent_.set_subscribers(connection_.subscribing_peers());
    if (stop_requested()) return false;
    if (needed > 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool ImageServer::send(const TensorList& batch) {
  const Clock::time_point start = Clock::now();
  try {
    // A PUSH socket whose receivers are all gone blocks a send until one
    // comes back, and a stop signal that came just before the send would
    // never be seen: wait in slices instead, looking for one, and send only
    // what can leave at once (a receiver may leave between the wait and the
    // send).
    for (;;) {
      // Nobody listening: wait rather than decode for nobody (PUB would
      // drop every batch), looking for a stop request between waits.
      if (!await_subscribers()) return false;
      while (!connection_.wait_writable(Milliseconds(50))) {
        if (stop_requested()) return false;
      }
      if (connection_.try_send(batch) != Connection::Sent::kWouldBlock) break;
      if (stop_requested()) return false;
    }
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
    if (options_.format.metadata) list.push_back(metadata_tensor(metadata_of(*batch)));
    if (!send_counted(list)) return;
    if (options_.repeat_first_batch) return repeat(list);
  }
}

BatchMetadata ImageServer::metadata_of(AssembledBatch& batch) const {
  BatchMetadata m;
  m.keys = std::move(batch.keys);
  m.shards = std::move(batch.shards);
  m.server = server_id_;
  m.sequence = sent_.batches();
  m.geometry = std::move(batch.geometry);
  m.epoch = batch.place.epoch;
  m.size = static_cast<std::uint32_t>(batch.size);
  StreamPlace& place = m.place.emplace();
  place.stream = identity_.stream;
  place.fingerprint = identity_.fingerprint;
  place.seed = options_.order.seed;
  place.batch = batch.place.index;
  if (options_.epoch_batches) place.batches = options_.epoch_batches;
  place.last = batch.last;
  return m;
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

std::string ImageServer::replaced_summary() const {
  std::string out;
  std::uint64_t total = 0;
  {
    std::lock_guard lock(replaced_mutex_);
    for (const imaging::Problem problem : imaging::kAllProblems) {
      const std::uint64_t n = replaced_[static_cast<std::size_t>(problem)];
      if (n == 0) continue;
      total += n;
      out += (out.empty() ? "" : ", ") + std::string(imaging::problem_name(problem)) + " " + std::to_string(n);
    }
  }
  out = std::to_string(total) + (out.empty() ? "" : " (" + out + ")");
  if (unfilled_) out += ", not replaceable " + std::to_string(unfilled_.load());
  if (replayed_) out += "; passed over (consumed before the resume): " + std::to_string(replayed_.load());
  return out;
}

void ImageServer::summary(double seconds) const {
  const std::uint64_t samples = sent_.samples();
  std::cout << options_.program << ": done: served " << samples << " samples in " << sent_.batches() << " batches in "
            << seconds << " s (" << (seconds > 0 ? static_cast<double>(samples) / seconds : 0.0)
            << " images/s); skipped: " << skips_.summary() << "; shard errors: " << shard_errors_
            << "; replaced by a neighbour: " << replaced_summary()
            << "; JPEGs cut at restart markers: " << jpegs_sliced_ << " of " << jpegs_total_
            << "; peak memory: " << peak_memory_mib() << " MiB" << std::endl;
  const Connection::DroppedPeers dropped = connection_.dropped_peers();
  if (dropped.unfinished || dropped.flooding || dropped.over_limit) {
    std::cout << options_.program << ": peers dropped: " << dropped.unfinished
              << " that did not finish their handshake, " << dropped.flooding
              << " that sent more than a receiver needs to (their addresses then refused a while: "
              << dropped.refused_after_flooding << " reconnections), " << dropped.over_limit
              << " that came while the data port held its most peers (docs/security.md)" << std::endl;
  }
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
  if (stop_requested()) connection_.shorten_linger_for_stop();
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
  out.family("tensorcom_server_replaced_samples_total", metrics::MetricType::kCounter,
             "Skipped samples whose place a neighbour in the epoch's order filled, by why they were skipped.");
  SkipCounter::Counts replaced;
  {
    std::lock_guard lock(replaced_mutex_);
    replaced = replaced_;
  }
  for (const imaging::Problem problem : imaging::kAllProblems) {
    out.sample(replaced[static_cast<std::size_t>(problem)], {{"reason", imaging::problem_name(problem)}});
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

void say_resume(const ImageServerOptions& o) {
  std::cout << o.program << ": resuming from " << o.resume_path << " at epoch " << o.resume.first_epoch;
  if (!o.resume.stream_found)
    std::cout << " (the token names no stream " << stream_name(o) << ": nothing of it consumed)";
  std::cout << std::endl;
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
  for (std::size_t i = 0; i < source.units(); ++i) recipe.units.push_back(source.unit_label(i));
  return {stream_name(o), stream_fingerprint(recipe), o.order.seed, o.epoch_batches};
}

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
  ImageServerOptions resolved = options;
  if (!options.resume_path.empty()) {
    resolved.resume = read_resume_token(options.resume_path, stream_identity(options, source));
    say_resume(resolved);
  }
  ImageServer server(resolved, source);
  return server.run();
}

}  // namespace tensorcom::pipeline
