// The sending end of an image server: takes complete batches from the
// assembler in stream order, adds their metadata (--meta), and sends each
// with send_until_stopped, counting it and writing a rate line every
// `report` batches. With repeat_first_batch, sends the first batch over and
// over (the transport alone, the reference's --benchmark).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "batch_assembler.h"
#include "resume_token.h"
#include "server_counters.h"
#include "tensorcom/codec/metadata.h"
#include "tensorcom/transport/connection.h"

namespace tensorcom::pipeline {

struct PublisherOptions {
  bool metadata = false;          // a metadata tensor after images and labels
  std::string server_id;          // in metadata
  StreamIdentity identity;        // the stream's name, fingerprint, seed, --epoch-batches
  std::uint64_t subscribers = 0;  // PUB: the first batch waits for this many (0: one)
  std::uint64_t report = 10;      // a rate line every N batches (0: never)
  bool repeat_first_batch = false;
};

class BatchPublisher {
 public:
  // stop_requested: polled while a send waits; true ends publishing.
  BatchPublisher(PublisherOptions options, Connection& connection, ServerCounters& counters,
                 std::function<bool()> stop_requested);

  // Sends every batch the assembler hands out until it hands out none or a
  // stop comes. `before_repeating` is called once the first batch is kept
  // for repeat_first_batch (the server stops its reader and workers then).
  void publish(BatchAssembler& assembler, const std::function<void()>& before_repeating = {});

  // The metadata of `batch` as it is sent now (its sequence is the count
  // of batches sent before it); moves its keys, shards and geometry out.
  [[nodiscard]] BatchMetadata metadata_of(AssembledBatch& batch) const;

 private:
  bool send_counted(const TensorList& batch);

  PublisherOptions options_;
  Connection& connection_;
  ServerCounters& counters_;
  std::function<bool()> stop_requested_;
};

}  // namespace tensorcom::pipeline
