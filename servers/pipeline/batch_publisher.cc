#include "batch_publisher.h"

#include <chrono>
#include <utility>

#include "tensorcom/transport/connection_controls.h"

namespace tensorcom::pipeline {

BatchPublisher::BatchPublisher(PublisherOptions options, Connection& connection, ServerCounters& counters,
                               std::function<bool()> stop_requested)
    : options_(std::move(options)),
      connection_(connection),
      counters_(counters),
      stop_requested_(std::move(stop_requested)) {}

void BatchPublisher::publish(BatchAssembler& assembler, const std::function<void()>& before_repeating) {
  while (auto batch = assembler.next_ready()) {
    TensorList list{batch->images, batch->labels};
    if (options_.metadata) list.push_back(metadata_tensor(metadata_of(*batch)));
    if (!send_counted(list)) return;
    if (!options_.repeat_first_batch) continue;
    // The reader and workers are stopped first, so that decoding takes no
    // CPU from sending: what is measured is the transport alone.
    if (before_repeating) before_repeating();
    while (!(stop_requested_ && stop_requested_()) && send_counted(list)) {
    }
    return;
  }
}

// Sends the batch and counts it; false when serving ends.
bool BatchPublisher::send_counted(const TensorList& batch) {
  metrics::SenderMetrics& sent = counters_.sent();
  StoppableSend how;
  how.stop_requested = stop_requested_;
  // Before the first batch, all of --subscribers: one that joined later
  // would miss the start of the epoch. After it, any one.
  how.subscribers = sent.batches() == 0 ? options_.subscribers : 1;
  how.on_subscribers = [&sent](std::uint64_t subscribers) { sent.set_subscribers(subscribers); };
  const auto start = std::chrono::steady_clock::now();
  if (!send_until_stopped(connection_, batch, how)) return false;
  sent.add_send_blocked(std::chrono::steady_clock::now() - start);
  sent.sent(static_cast<std::uint64_t>(batch[1].dim(0)), batch_bytes(batch));
  if (options_.report && sent.batches() % options_.report == 0) counters_.report(connection_);
  return true;
}

BatchMetadata BatchPublisher::metadata_of(AssembledBatch& batch) const {
  BatchMetadata m;
  m.keys = std::move(batch.keys);
  m.shards = std::move(batch.shards);
  m.server = options_.server_id;
  m.sequence = counters_.sent().batches();
  m.geometry = std::move(batch.geometry);
  m.epoch = batch.place.epoch;
  m.size = static_cast<std::uint32_t>(batch.size);
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
