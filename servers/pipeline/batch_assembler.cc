#include "batch_assembler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <string>

namespace tensorcom::pipeline {

// Equal, 64-byte-aligned buffers, in two kinds of hands. The pipeline
// (batches being filled or waiting for the publisher) holds at most
// `pipeline_limit` of them: that bounds the server's own memory. Once sent, a
// buffer is held by the transport until ZeroMQ has written it to every peer
// it was queued for; that count is bounded by ZeroMQ's high-water mark per
// peer, not here, so that a stuck subscriber of a PUB socket never starves
// the pipeline (and every other subscriber) of buffers. Buffers come back
// when the last reference to them is dropped, which may happen on the
// transport's thread after the assembler is gone: hence the pool is shared.
// Up to `pipeline_limit` returned buffers are kept for reuse (their pages
// stay mapped); the rest are freed.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  BufferPool(std::size_t bytes, std::size_t pipeline_limit) : bytes_(bytes), pipeline_limit_(pipeline_limit) {}
  ~BufferPool() {
    for (std::byte* p : free_) free_buffer(p);
  }

  // A buffer and the pipeline's hold on it, or nothing if the pipeline
  // already holds pipeline_limit buffers.
  std::optional<PooledBuffer> try_acquire() {
    std::byte* raw = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (in_pipeline_ >= pipeline_limit_) return std::nullopt;
      ++in_pipeline_;
      if (!free_.empty()) {
        raw = free_.back();
        free_.pop_back();
      }
    }
    if (!raw) raw = static_cast<std::byte*>(::operator new (bytes_, std::align_val_t{kTensorAlignment}));
    auto self = shared_from_this();
    return PooledBuffer{std::shared_ptr<std::byte>(raw, [self](std::byte* p) { self->release(p); }),
                        std::shared_ptr<void>(nullptr, [self](void*) { self->end_pipeline_hold(); })};
  }

 private:
  void release(std::byte* p) {
    {
      std::lock_guard lock(mutex_);
      if (free_.size() < pipeline_limit_) {
        free_.push_back(p);
        return;
      }
    }
    free_buffer(p);
  }
  void end_pipeline_hold() {
    std::lock_guard lock(mutex_);
    --in_pipeline_;
  }
  static void free_buffer(std::byte* p) { ::operator delete (p, std::align_val_t{kTensorAlignment}); }

  std::size_t bytes_;
  std::size_t pipeline_limit_;
  std::size_t in_pipeline_ = 0;
  std::mutex mutex_;
  std::vector<std::byte*> free_;
};

struct BatchAssembler::Filling {
  BatchPlace place;
  BatchFormat format;  // the batch's own image size
  std::shared_ptr<std::byte> memory;
  std::shared_ptr<void> pipeline_hold;  // counts this buffer against max_batches
  std::size_t expected = 0;
  std::size_t committed = 0;
  std::size_t empty = 0;
  bool last = false;
  std::vector<bool> filled;
  std::vector<std::string> keys;
  std::vector<std::string> shards;
  std::vector<SampleGeometry> geometry;

  [[nodiscard]] bool complete() const noexcept { return committed + empty == expected; }
};

namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t k) { return (n + k - 1) / k * k; }

// Images first, then the labels, at an aligned offset.
std::size_t labels_offset_of(const BatchFormat& format) {
  return round_up(format.image_bytes() * format.batch_size, kTensorAlignment);
}

// How long open() waits before looking at the pool again: the publisher
// ends its hold on a sent batch without signalling us.
constexpr auto kPoolPoll = std::chrono::milliseconds(2);

std::string describe(BatchPlace place) {
  return "batch " + std::to_string(place.index) + " of epoch " + std::to_string(place.epoch);
}

}  // namespace

BatchAssembler::BatchAssembler(BatchFormat format, std::size_t max_batches, int largest_size)
    : format_(format), largest_size_(std::max(largest_size, format.size)) {
  if (format_.batch_size == 0) throw ArgumentError("batch size must be positive");
  // Every buffer holds a batch of the largest size, so that a size change
  // reuses the pool instead of replacing it while sent batches still hold it.
  BatchFormat largest = format_;
  largest.size = largest_size_;
  std::size_t bytes = labels_offset_of(largest) + format_.batch_size * sizeof(std::int32_t);
  pool_ = std::make_shared<BufferPool>(bytes, std::max<std::size_t>(max_batches, 2));
}

BatchAssembler::~BatchAssembler() = default;

BatchAssembler::Filling& BatchAssembler::find(BatchPlace place) {
  for (Filling& f : filling_) {
    if (f.place == place) return f;
  }
  throw Error("no open " + describe(place));
}

std::size_t BatchAssembler::labels_offset(const Filling& batch) const { return labels_offset_of(batch.format); }

bool BatchAssembler::open(BatchPlace place, std::size_t expected, int size) {
  if (expected == 0 || expected > format_.batch_size)
    throw Error("a batch of " + std::to_string(expected) + " samples");
  if (size < 1 || size > largest_size_) {
    throw ArgumentError("size " + std::to_string(size) + " is not 1 to " + std::to_string(largest_size_));
  }
  std::unique_lock lock(mutex_);
  for (;;) {
    if (cancelled_) return false;
    if (std::optional<PooledBuffer> buffer = pool_->try_acquire()) {
      Filling& f = filling_.emplace_back();
      f.place = place;
      f.format = format_;
      f.format.size = size;
      f.memory = std::move(buffer->memory);
      f.pipeline_hold = std::move(buffer->pipeline_hold);
      f.expected = expected;
      f.filled.assign(expected, false);
      f.keys.resize(expected);
      f.shards.resize(expected);
      f.geometry.resize(expected);
      return true;
    }
    changed_.wait_for(lock, kPoolPoll);
  }
}

void BatchAssembler::end_epoch_at(BatchPlace place, std::size_t count) {
  std::lock_guard lock(mutex_);
  Filling& f = find(place);
  if (count == 0 || count > f.expected || f.committed + f.empty > count) {
    throw Error(describe(place) + " cannot end its epoch at " + std::to_string(count) + " samples");
  }
  f.expected = count;
  f.last = true;
  notify_if_complete(f);
}

SampleSlot BatchAssembler::slot(BatchPlace place, std::size_t index) {
  std::lock_guard lock(mutex_);
  Filling& f = find(place);
  if (index >= f.expected) throw Error("slot " + std::to_string(index) + " of " + describe(place));
  std::byte* image = f.memory.get() + index * f.format.image_bytes();
  return {place, index, f.format.direct() ? reinterpret_cast<std::uint8_t*>(image) : nullptr, image, &f.format};
}

void BatchAssembler::commit(const SampleSlot& slot, const std::uint8_t* hwc, std::int32_t label, std::string key,
                            std::string shard, const SampleGeometry& geometry) {
  // The slot's memory is this caller's alone until it is committed.
  if (!slot.direct) {
    convert_image(*slot.format, hwc, slot.image);
    if (geometry.erase) {
      erase_image(*slot.format, slot.image, *geometry.erase,
                  geometry.erase_seed != 0 ? std::optional<std::uint64_t>(geometry.erase_seed) : std::nullopt);
    }
  }
  std::lock_guard lock(mutex_);
  Filling& f = find(slot.batch);
  std::memcpy(f.memory.get() + labels_offset(f) + slot.index * sizeof label, &label, sizeof label);
  f.filled[slot.index] = true;
  f.keys[slot.index] = std::move(key);
  f.shards[slot.index] = std::move(shard);
  f.geometry[slot.index] = geometry;
  ++f.committed;
  notify_if_complete(f);
}

void BatchAssembler::leave_empty(const SampleSlot& slot) {
  std::lock_guard lock(mutex_);
  Filling& f = find(slot.batch);
  ++f.empty;
  notify_if_complete(f);
}

// Only the oldest batch concerns the publisher. Waking it for every image
// cost two context switches per image when threads share a core.
void BatchAssembler::notify_if_complete(const Filling& batch) {
  if (batch.complete() && &batch == &filling_.front()) changed_.notify_all();
}

// Moves the filled slots to the front, in order (rare: a slot left empty),
// and views the batch's memory as tensors.
AssembledBatch BatchAssembler::make_ready(Filling& f) {
  const std::size_t image_bytes = f.format.image_bytes();
  std::byte* labels = f.memory.get() + labels_offset(f);
  std::size_t count = 0;
  for (std::size_t from = 0; from < f.expected; ++from) {
    if (!f.filled[from]) continue;
    if (count != from) {
      std::memmove(f.memory.get() + count * image_bytes, f.memory.get() + from * image_bytes, image_bytes);
      std::memmove(labels + count * sizeof(std::int32_t), labels + from * sizeof(std::int32_t), sizeof(std::int32_t));
      f.keys[count] = std::move(f.keys[from]);
      f.shards[count] = std::move(f.shards[from]);
      f.geometry[count] = f.geometry[from];
    }
    ++count;
  }
  auto n = static_cast<std::int64_t>(count);
  AssembledBatch batch;
  batch.images = Tensor::view(f.format.dtype(), f.format.image_shape(n), f.memory.get(), f.memory);
  batch.labels = Tensor::view(DType::kInt32, {n}, labels, f.memory);
  f.keys.resize(count);
  f.shards.resize(count);
  f.geometry.resize(count);
  batch.keys = std::move(f.keys);
  batch.shards = std::move(f.shards);
  batch.geometry = std::move(f.geometry);
  batch.place = f.place;
  batch.last = f.last;
  batch.empty_slots = f.empty;
  batch.size = f.format.size;
  batch.pipeline_hold = std::move(f.pipeline_hold);
  return batch;
}

void BatchAssembler::finish() {
  std::lock_guard lock(mutex_);
  finished_ = true;
  changed_.notify_all();
}

std::optional<AssembledBatch> BatchAssembler::next_ready() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] {
    return cancelled_ || (!filling_.empty() && filling_.front().complete()) || (finished_ && filling_.empty());
  });
  if (cancelled_ || filling_.empty()) return std::nullopt;
  AssembledBatch batch = make_ready(filling_.front());
  filling_.pop_front();
  if (!filling_.empty() && filling_.front().complete()) changed_.notify_all();
  return batch;
}

void BatchAssembler::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  changed_.notify_all();
}

std::size_t BatchAssembler::ready_batches() {
  std::lock_guard lock(mutex_);
  std::size_t ready = 0;
  for (const Filling& f : filling_) ready += f.complete() ? 1 : 0;
  return ready;
}

}  // namespace tensorcom::pipeline
