// Assembles batches in a fixed order from samples decoded in parallel,
// straight into the memory that is sent. Sample p of an epoch goes to batch
// p / B, slot p % B: what a batch holds depends only on the order the reader
// emits samples in, never on which worker is faster (docs/deploy.md's
// determinism contract). The reader opens each batch, in order, before it
// emits the batch's first sample; workers write into their sample's slot and
// commit it, or leave it empty when nothing could fill it; batches are handed
// to the publisher in the order they were opened, once every slot is done.
//
// Memory is bounded: the pipeline holds at most max_batches batch buffers,
// being filled or waiting to be sent; an AssembledBatch's hold ends when it
// is destroyed (after send). Sent buffers stay alive while the transport
// holds them (ZeroMQ bounds that: high-water mark per peer) and do not count
// against max_batches, so a peer that stops reading cannot stall the others.
// Buffers are reused, so the same pages serve batch after batch. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "batch_format.h"
#include "tensorcom/codec/metadata.h"
#include "tensorcom/codec/tensor.h"

namespace tensorcom::pipeline {

class BufferPool;

// Where a batch sits in a server's stream.
struct BatchPlace {
  std::uint64_t epoch = 0;
  std::uint64_t index = 0;  // within the epoch, from 0

  bool operator==(const BatchPlace&) const = default;
};

struct SampleSlot {
  BatchPlace batch;                     // which batch
  std::size_t index = 0;                // which image of it
  std::uint8_t* direct = nullptr;       // where to write uint8 HWC pixels, if the format allows
  std::byte* image = nullptr;           // the slot's image memory in the output format
  const BatchFormat* format = nullptr;  // the batch's format (its size); valid until the slot is done
};

// One batch buffer: its memory (shared with the tensors that view it) and the
// pipeline's hold on it, which ends when the last copy of the hold is dropped.
struct PooledBuffer {
  std::shared_ptr<std::byte> memory;
  std::shared_ptr<void> pipeline_hold;
};

struct AssembledBatch {
  Tensor images;
  Tensor labels;  // int32 (n,)
  std::vector<std::string> keys;
  std::vector<std::string> shards;
  std::vector<SampleGeometry> geometry;
  BatchPlace place;
  bool last = false;                    // the epoch's last batch
  std::size_t empty_slots = 0;          // samples it is short of: nothing could fill them
  int size = 0;                         // its images' height and width
  std::shared_ptr<void> pipeline_hold;  // drop it once the batch is handed to the transport
};

class BatchAssembler {
 public:
  // largest_size: the largest size open() may be given (buffers are made for
  // it); 0: format.size.
  BatchAssembler(BatchFormat format, std::size_t max_batches, int largest_size = 0);
  ~BatchAssembler();

  // Opens the batch at `place` for `expected` samples (1 .. batch size) of
  // size x size pixels; blocks while every batch buffer is in use. Batches
  // are opened in stream order. False after cancel().
  bool open(BatchPlace place, std::size_t expected, int size);
  // The open batch at `place` holds `count` samples and ends its epoch.
  // Called before its last sample is handed to a worker.
  void end_epoch_at(BatchPlace place, std::size_t count);

  // Slot `index` of the open batch at `place`. Its memory is the caller's
  // until commit() or leave_empty().
  [[nodiscard]] SampleSlot slot(BatchPlace place, std::size_t index);
  // The image is in the slot (written to slot.direct, or converted from hwc
  // when slot.direct is null).
  void commit(const SampleSlot& slot, const std::uint8_t* hwc, std::int32_t label, std::string key, std::string shard,
              const SampleGeometry& geometry = {});
  // No sample could fill the slot: its batch is sent without it.
  void leave_empty(const SampleSlot& slot);

  // The oldest opened batch once all its slots are done; blocks. After
  // finish(), nothing once every opened batch is handed out; nothing after
  // cancel().
  [[nodiscard]] std::optional<AssembledBatch> next_ready();
  // No more batches will be opened.
  void finish();
  // Wakes everyone; open() and next_ready() return nothing from now on.
  void cancel();

  [[nodiscard]] const BatchFormat& format() const noexcept { return format_; }
  // Complete batches waiting for next_ready() (for metrics).
  [[nodiscard]] std::size_t ready_batches();

 private:
  struct Filling;
  Filling& find(BatchPlace place);
  [[nodiscard]] std::size_t labels_offset(const Filling& batch) const;
  AssembledBatch make_ready(Filling& batch);
  void notify_if_complete(const Filling& batch);

  BatchFormat format_;
  int largest_size_;
  std::shared_ptr<BufferPool> pool_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Filling> filling_;  // oldest first
  bool finished_ = false;
  bool cancelled_ = false;
};

}  // namespace tensorcom::pipeline
