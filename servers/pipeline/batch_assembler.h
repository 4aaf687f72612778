// Assembles batches from samples decoded in parallel, straight into the
// memory that is sent. Workers take a slot, write their image into it, and
// commit it (or abandon it, when the sample proves bad, so that another
// sample fills it). A batch is ready when all its slots are committed.
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
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "batch_format.h"
#include "tensorcom/metadata.h"
#include "tensorcom/tensor.h"

namespace tensorcom::pipeline {

class BufferPool;

struct SampleSlot {
  std::uint64_t batch = 0;         // which batch
  std::size_t index = 0;           // which image of it
  std::uint8_t* direct = nullptr;  // where to write uint8 HWC pixels, if the format allows
  std::byte* image = nullptr;      // the slot's image memory in the output format
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
  std::uint64_t epoch = 0;              // the earliest epoch among its samples
  int size = 0;                         // its images' height and width
  std::shared_ptr<void> pipeline_hold;  // drop it once the batch is handed to the transport
};

class BatchAssembler {
 public:
  // largest_size: the largest format.size set_size() may be given (buffers
  // are made for it); 0: format.size.
  BatchAssembler(BatchFormat format, std::size_t max_batches, int largest_size = 0);
  ~BatchAssembler();

  // A free slot; blocks while every batch buffer is in use. Nothing after cancel().
  [[nodiscard]] std::optional<SampleSlot> acquire();
  // The image is in the slot (written to slot.direct, or converted from hwc
  // when slot.direct is null). Records label, key, shard and the epoch the
  // sample was read in.
  void commit(const SampleSlot& slot, const std::uint8_t* hwc, std::int32_t label, std::string key, std::string shard,
              const SampleGeometry& geometry = {}, std::uint64_t epoch = 0);
  // Gives the slot back to be filled by another sample.
  void abandon(const SampleSlot& slot);

  // The next full batch; blocks. After finish(), also what the partly
  // filled batches held, packed in order so that only the last batch is
  // short; then nothing. Nothing after cancel().
  [[nodiscard]] std::optional<AssembledBatch> next_ready();
  // What is partly filled becomes ready now, packed as finish() packs it, so
  // that no batch holds samples from both sides of this call (an epoch's
  // end). REQUIRES: no slot is held.
  void flush();
  // No more samples will be committed: what is partly filled becomes ready.
  // REQUIRES: no slot is held.
  void finish();
  // Batches from now on have images of size x size. REQUIRES: nothing is
  // being filled (flush() first, no slot held); size <= largest_size.
  void set_size(int size);
  // Wakes everyone; acquire() and next_ready() return nothing from now on.
  void cancel();

  [[nodiscard]] const BatchFormat& format() const noexcept { return format_; }
  // Full batches waiting for next_ready() (for metrics).
  [[nodiscard]] std::size_t ready_batches();

 private:
  struct Filling;
  Filling* find(std::uint64_t id);
  std::optional<SampleSlot> take_slot_locked();
  SampleSlot slot_of(Filling& batch, std::size_t index) const;
  AssembledBatch make_ready(Filling& batch, std::size_t count);
  void move_sample(Filling& src, std::size_t from, Filling& dst, std::size_t to);
  std::size_t pack_partial_batches();

  BatchFormat format_;
  int largest_size_;
  std::size_t labels_offset_;  // labels follow the images in one buffer
  std::shared_ptr<BufferPool> pool_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::list<Filling> filling_;  // oldest first; the last may still hand out new slots
  std::deque<AssembledBatch> ready_;
  std::uint64_t next_id_ = 0;
  bool finished_ = false;
  bool cancelled_ = false;
};

}  // namespace tensorcom::pipeline
