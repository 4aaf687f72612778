// The sending end of an image server: takes complete batches from the
// assembler in stream order, adds their metadata (--meta), and sends each
// with send_until_stopped (or through a ConfirmedDelivery), counting it and
// writing a rate line every `report` batches; a stream that serves nothing
// for 1,024 samples or a whole epoch ends with an error instead. With repeat_first_batch, sends the
// first batch over and over (the transport alone, the reference's
// --benchmark).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "batch_assembler.h"
#include "batch_mixer.h"
#include "resume_token.h"
#include "server_counters.h"
#include "tensorcom/codec/compressed_images.h"
#include "tensorcom/codec/metadata.h"
#include "tensorcom/transport/connection.h"
#include "tensorcom/transport/delivery.h"

namespace tensorcom::pipeline {

struct PublisherOptions {
  bool metadata = false;          // a metadata tensor after images and labels
  std::string server_id;          // in metadata
  StreamIdentity identity;        // the stream's name, fingerprint, seed, --epoch-batches
  std::uint64_t subscribers = 0;  // PUB: the first batch waits for this many (0: one)
  std::uint64_t report = 10;      // a rate line every N batches (0: never)
  bool repeat_first_batch = false;
  // PUSH with metadata: keep each batch until a receiver confirms it, and
  // send again what a lost connection may have dropped (delivery.h).
  bool confirm = false;
  DeliveryOptions delivery;
  // Before the first batch, wait this long for a receiver to connect
  // (0: do not wait).
  Milliseconds wait_for_receiver{0};
  // MixUp/CutMix each batch before it is sent, its draws in a tensor after
  // the labels (batch_mixer.h); unset: none.
  std::optional<imaging::MixOptions> mix;
  std::vector<std::string> recipe;  // in metadata: the augmentation flags, flag, value, ...
  // Images compressed for the wire (compressed_images.h), after mixing, on
  // wire_threads threads; raw: as they are.
  WireFormat wire;
  int wire_threads = 1;
};

// How delivery ended.
struct DeliveryOutcome {
  bool confirmed = false;               // receipts were asked for
  DeliveryCounts counts;                // zero when not
  std::vector<BatchPlace> unconfirmed;  // the first few batches left unconfirmed
};

class BatchPublisher {
 public:
  // stop_requested: polled while a send waits; true ends publishing.
  BatchPublisher(PublisherOptions options, Connection& connection, ServerCounters& counters,
                 std::function<bool()> stop_requested);
  ~BatchPublisher();
  BatchPublisher(const BatchPublisher&) = delete;
  BatchPublisher& operator=(const BatchPublisher&) = delete;

  // Sends every batch the assembler hands out until it hands out none or a
  // stop comes. `before_repeating` is called once the first batch is kept
  // for repeat_first_batch (the server stops its reader and workers then).
  void publish(BatchAssembler& assembler, const std::function<void()>& before_repeating = {});

  // After publish(): waits at most `timeout` for receipts of every batch
  // sent (without confirmation, returns at once) and says what was left.
  [[nodiscard]] DeliveryOutcome settle(Milliseconds timeout);

  // The metadata of `batch` as it is sent now (its sequence is the count
  // of batches sent before it); moves its keys, shards and geometry out.
  [[nodiscard]] BatchMetadata metadata_of(AssembledBatch& batch) const;

 private:
  bool send_counted(TensorList batch, BatchPlace place);
  bool send_batch(TensorList batch);
  bool wait_for_receiver();
  void give_up_if_hopeless(const AssembledBatch& batch);
  void forget_confirmed_places();

  PublisherOptions options_;
  std::optional<BatchMixer> mixer_;
  Connection& connection_;
  ServerCounters& counters_;
  std::function<bool()> stop_requested_;
  std::unique_ptr<ConfirmedDelivery> delivery_;  // when options_.confirm
  std::map<std::uint64_t, BatchPlace> places_;   // of batches perhaps unconfirmed, by sequence
  std::size_t nothing_served_ = 0;               // samples that came to nothing before any was served
};

}  // namespace tensorcom::pipeline
