#include "batch_publisher.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "tensorcom/transport/connection_controls.h"

namespace tensorcom::pipeline {

namespace {

// The places of unconfirmed batches a failed delivery names.
constexpr std::size_t kPlacesNamed = 8;

}  // namespace

BatchPublisher::BatchPublisher(PublisherOptions options, Connection& connection, ServerCounters& counters,
                               std::function<bool()> stop_requested)
    : options_(std::move(options)),
      connection_(connection),
      counters_(counters),
      stop_requested_(std::move(stop_requested)) {
  if (options_.confirm) delivery_ = std::make_unique<ConfirmedDelivery>(connection_, options_.delivery);
  if (options_.mix) mixer_.emplace(*options_.mix, options_.identity.seed, options_.identity.stream);
}

BatchPublisher::~BatchPublisher() = default;

void BatchPublisher::publish(BatchAssembler& assembler, const std::function<void()>& before_repeating) {
  if (!wait_for_receiver()) return;
  while (auto batch = assembler.next_ready()) {
    if (counters_.sent().samples() == 0) give_up_if_hopeless(*batch);
    TensorList list{batch->images, batch->labels};
    if (mixer_) list.push_back(mixer_->mix(*batch, assembler.format().layout == ImageLayout::kBHWC));
    if (options_.wire.kind != WireFormat::Kind::kRaw) {
      TensorList compressed = compress_images(list[0], options_.wire, options_.wire_threads);
      list.erase(list.begin());
      list.insert(list.begin(), compressed.begin(), compressed.end());
    }
    const BatchPlace place = batch->place;
    if (options_.metadata) list.push_back(metadata_tensor(metadata_of(*batch)));
    if (!options_.repeat_first_batch) {
      if (!send_counted(std::move(list), place)) return;
      continue;
    }
    // The reader and workers are stopped first, so that decoding takes no
    // CPU from sending: what is measured is the transport alone.
    if (!send_counted(list, place)) return;
    if (before_repeating) before_repeating();
    while (!(stop_requested_ && stop_requested_()) && send_counted(list, place)) {
    }
    return;
  }
}

// Before any sample was served: a stream of nothing but bad samples (those
// that certainly cannot be served are looked past for 65,536 samples) ends
// with an error once kHopeless samples, or a whole epoch, gave nothing,
// rather than batch after batch of nothing. (Past the first sample served,
// an empty batch is sent, so that the epoch keeps its batch count: a bound
// on memory can leave a batch of one without a replacement.)
void BatchPublisher::give_up_if_hopeless(const AssembledBatch& batch) {
  constexpr std::size_t kHopeless = 1024;
  if (batch.labels.dim(0) > 0) return;  // the first samples served
  nothing_served_ += batch.empty_slots;
  if (nothing_served_ < kHopeless && !batch.last) return;
  throw ArgumentError("none of the first " + std::to_string(nothing_served_) + " samples (to epoch " +
                      std::to_string(batch.place.epoch) + ", batch " + std::to_string(batch.place.index) +
                      ") could be served, nor any sample near them (see the warnings above): stopping rather than "
                      "sending batches of nothing");
}

// False if a stop came first; throws if no receiver came in time.
bool BatchPublisher::wait_for_receiver() {
  const Milliseconds wait = options_.wait_for_receiver;
  const auto say = [this](std::string_view line) { counters_.log().info(line); };
  if (tensorcom::wait_for_receiver(connection_, wait, stop_requested_, say)) return true;
  if (stop_requested_ && stop_requested_()) return false;
  throw TransportError("no receiver came to " + connection_.describe() + " within " +
                       std::to_string(wait.count() / 1000) + " s (--wait-for-receiver): nothing was sent");
}

// Sends the batch and counts it; false when serving ends.
bool BatchPublisher::send_counted(TensorList batch, BatchPlace place) {
  metrics::SenderMetrics& sent = counters_.sent();
  const auto samples = static_cast<std::uint64_t>(batch[1].dim(0));
  const std::uint64_t bytes = batch_bytes(batch);
  if (delivery_) {
    places_[sent.batches()] = place;
    if (places_.size() > 4 * options_.delivery.window) forget_confirmed_places();
  }
  const auto start = std::chrono::steady_clock::now();
  if (!send_batch(std::move(batch))) return false;
  sent.add_send_blocked(std::chrono::steady_clock::now() - start);
  sent.sent(samples, bytes);
  if (options_.report && sent.batches() % options_.report == 0) counters_.report(connection_);
  return true;
}

bool BatchPublisher::send_batch(TensorList batch) {
  metrics::SenderMetrics& sent = counters_.sent();
  StoppableSend how;
  how.stop_requested = stop_requested_;
  // Before the first batch, all of --subscribers: one that joined later
  // would miss the start of the epoch. After it, any one.
  how.subscribers = sent.batches() == 0 ? options_.subscribers : 1;
  how.on_subscribers = [&sent](std::uint64_t subscribers) { sent.set_subscribers(subscribers); };
  if (delivery_) return delivery_->send(sent.batches(), std::move(batch), how);
  return send_until_stopped(connection_, batch, how);
}

void BatchPublisher::forget_confirmed_places() {
  std::map<std::uint64_t, BatchPlace> kept;
  for (std::uint64_t sequence : delivery_->unconfirmed()) {
    if (auto it = places_.find(sequence); it != places_.end()) kept.insert(*it);
  }
  places_ = std::move(kept);
}

DeliveryOutcome BatchPublisher::settle(Milliseconds timeout) {
  DeliveryOutcome outcome;
  if (!delivery_) return outcome;
  outcome.confirmed = true;
  (void)delivery_->settle(timeout, stop_requested_);
  outcome.counts = delivery_->counts();
  for (std::uint64_t sequence : delivery_->unconfirmed()) {
    if (outcome.unconfirmed.size() == kPlacesNamed) break;
    if (auto it = places_.find(sequence); it != places_.end()) outcome.unconfirmed.push_back(it->second);
  }
  return outcome;
}

BatchMetadata BatchPublisher::metadata_of(AssembledBatch& batch) const {
  BatchMetadata m;
  m.keys = std::move(batch.keys);
  m.shards = std::move(batch.shards);
  m.server = options_.server_id;
  m.sequence = counters_.sent().batches();
  if (delivery_) m.receipt = delivery_->receipt();
  m.geometry = std::move(batch.geometry);
  m.epoch = batch.place.epoch;
  m.size = static_cast<std::uint32_t>(batch.size);
  m.recipe = options_.recipe;
  StreamPlace& place = m.place.emplace();
  place.stream = options_.identity.stream;
  place.fingerprint = options_.identity.fingerprint;
  place.seed = options_.identity.seed;
  place.batch = batch.place.index;
  if (options_.identity.epoch_batches) place.batches = options_.identity.epoch_batches;
  place.last = batch.last;
  return m;
}

}  // namespace tensorcom::pipeline
