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
  std::uint64_t id = 0;
  std::shared_ptr<std::byte> memory;
  std::shared_ptr<void> pipeline_hold;  // counts this buffer against max_batches
  std::size_t handed_out = 0;           // slots given out so far (new ones)
  std::size_t committed = 0;
  std::vector<std::size_t> returned;  // abandoned slots, to hand out again
  std::vector<bool> filled;
  std::vector<std::string> keys;
  std::vector<std::string> shards;
  std::vector<SampleGeometry> geometry;
  std::vector<std::uint64_t> epochs;
};

namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t k) { return (n + k - 1) / k * k; }

// Images first, then the labels, at an aligned offset.
std::size_t labels_offset_of(const BatchFormat& format) {
  return round_up(format.image_bytes() * format.batch_size, kTensorAlignment);
}

// How long acquire() waits before looking at the pool again: the publisher
// ends its hold on a sent batch without signalling us.
constexpr auto kPoolPoll = std::chrono::milliseconds(2);

}  // namespace

BatchAssembler::BatchAssembler(BatchFormat format, std::size_t max_batches, int largest_size)
    : format_(format), largest_size_(std::max(largest_size, format.size)), labels_offset_(labels_offset_of(format)) {
  if (format_.batch_size == 0) throw ArgumentError("batch size must be positive");
  // Every buffer holds a batch of the largest size, so that a size change
  // reuses the pool instead of replacing it while sent batches still hold it.
  BatchFormat largest = format_;
  largest.size = largest_size_;
  std::size_t bytes = labels_offset_of(largest) + format_.batch_size * sizeof(std::int32_t);
  pool_ = std::make_shared<BufferPool>(bytes, std::max<std::size_t>(max_batches, 2));
}

BatchAssembler::~BatchAssembler() = default;

BatchAssembler::Filling* BatchAssembler::find(std::uint64_t id) {
  for (Filling& f : filling_) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

SampleSlot BatchAssembler::slot_of(Filling& batch, std::size_t index) const {
  std::byte* image = batch.memory.get() + index * format_.image_bytes();
  return {batch.id, index, format_.direct() ? reinterpret_cast<std::uint8_t*>(image) : nullptr, image};
}

std::optional<SampleSlot> BatchAssembler::take_slot_locked() {
  for (Filling& f : filling_) {
    if (!f.returned.empty()) {
      std::size_t index = f.returned.back();
      f.returned.pop_back();
      return slot_of(f, index);
    }
  }
  if (!filling_.empty() && filling_.back().handed_out < format_.batch_size) {
    Filling& f = filling_.back();
    return slot_of(f, f.handed_out++);
  }
  std::optional<PooledBuffer> buffer = pool_->try_acquire();
  if (!buffer) return std::nullopt;
  Filling& f = filling_.emplace_back();
  f.id = next_id_++;
  f.memory = std::move(buffer->memory);
  f.pipeline_hold = std::move(buffer->pipeline_hold);
  f.filled.assign(format_.batch_size, false);
  f.keys.resize(format_.batch_size);
  f.shards.resize(format_.batch_size);
  f.geometry.resize(format_.batch_size);
  f.epochs.resize(format_.batch_size);
  return slot_of(f, f.handed_out++);
}

std::optional<SampleSlot> BatchAssembler::acquire() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (cancelled_) return std::nullopt;
    if (auto slot = take_slot_locked()) return slot;
    changed_.wait_for(lock, kPoolPoll);
  }
}

void BatchAssembler::commit(const SampleSlot& slot, const std::uint8_t* hwc, std::int32_t label, std::string key,
                            std::string shard, const SampleGeometry& geometry, std::uint64_t epoch) {
  // The slot's memory is this caller's alone until it is committed.
  if (!slot.direct) convert_image(format_, hwc, slot.image);
  std::lock_guard lock(mutex_);
  Filling* f = find(slot.batch);
  if (!f) throw Error("commit of a slot whose batch is gone");
  std::memcpy(f->memory.get() + labels_offset_ + slot.index * sizeof label, &label, sizeof label);
  f->filled[slot.index] = true;
  f->keys[slot.index] = std::move(key);
  f->shards[slot.index] = std::move(shard);
  f->geometry[slot.index] = geometry;
  f->epochs[slot.index] = epoch;
  if (++f->committed == format_.batch_size) {
    ready_.push_back(make_ready(*f, format_.batch_size));
    filling_.remove_if([id = slot.batch](const Filling& g) { return g.id == id; });
    // Only a ready batch concerns a waiter. Waking the publisher for every
    // image cost two context switches per image when threads share a core.
    changed_.notify_all();
  }
}

void BatchAssembler::abandon(const SampleSlot& slot) {
  std::lock_guard lock(mutex_);
  if (Filling* f = find(slot.batch)) f->returned.push_back(slot.index);
  changed_.notify_all();
}

AssembledBatch BatchAssembler::make_ready(Filling& f, std::size_t count) {
  auto n = static_cast<std::int64_t>(count);
  AssembledBatch batch;
  batch.images = Tensor::view(format_.dtype(), format_.image_shape(n), f.memory.get(), f.memory);
  batch.labels = Tensor::view(DType::kInt32, {n}, f.memory.get() + labels_offset_, f.memory);
  f.keys.resize(count);
  f.shards.resize(count);
  f.geometry.resize(count);
  batch.keys = std::move(f.keys);
  batch.shards = std::move(f.shards);
  batch.geometry = std::move(f.geometry);
  batch.epoch = count ? *std::min_element(f.epochs.begin(), f.epochs.begin() + static_cast<std::ptrdiff_t>(count)) : 0;
  batch.size = format_.size;
  batch.pipeline_hold = std::move(f.pipeline_hold);
  return batch;
}

// Moves sample `from` of batch `src` to slot `to` of batch `dst`.
void BatchAssembler::move_sample(Filling& src, std::size_t from, Filling& dst, std::size_t to) {
  const std::size_t image_bytes = format_.image_bytes();
  std::memmove(dst.memory.get() + to * image_bytes, src.memory.get() + from * image_bytes, image_bytes);
  std::memmove(dst.memory.get() + labels_offset_ + to * sizeof(std::int32_t),
               src.memory.get() + labels_offset_ + from * sizeof(std::int32_t), sizeof(std::int32_t));
  dst.keys[to] = std::move(src.keys[from]);
  dst.shards[to] = std::move(src.shards[from]);
  dst.geometry[to] = src.geometry[from];
  dst.epochs[to] = src.epochs[from];
}

// Packs the committed samples of the partly filled batches, in order, into
// as few batches as they fill: only the last may be short. A sample moves
// only to a position at or before its own, so nothing unread is overwritten.
std::size_t BatchAssembler::pack_partial_batches() {
  const std::size_t size = format_.batch_size;
  std::vector<Filling*> batches;
  for (Filling& f : filling_) batches.push_back(&f);
  std::size_t to = 0;
  for (Filling* f : batches) {
    for (std::size_t from = 0; from < size; ++from) {
      if (!f->filled[from]) continue;
      Filling* dst = batches[to / size];
      if (dst != f || to % size != from) move_sample(*f, from, *dst, to % size);
      ++to;
    }
  }
  return to;
}

void BatchAssembler::finish() {
  flush();
  std::lock_guard lock(mutex_);
  finished_ = true;
  changed_.notify_all();
}

void BatchAssembler::set_size(int size) {
  std::lock_guard lock(mutex_);
  if (!filling_.empty()) throw Error("set_size while batches are being filled");
  if (size < 1 || size > largest_size_) {
    throw ArgumentError("size " + std::to_string(size) + " is not 1 to " + std::to_string(largest_size_));
  }
  format_.size = size;
  labels_offset_ = labels_offset_of(format_);
}

void BatchAssembler::flush() {
  std::lock_guard lock(mutex_);
  const std::size_t size = format_.batch_size;
  std::size_t total = pack_partial_batches();
  auto it = filling_.begin();
  for (std::size_t first = 0; first < total; first += size, ++it) {
    ready_.push_back(make_ready(*it, std::min(size, total - first)));
  }
  filling_.clear();
  changed_.notify_all();
}

std::optional<AssembledBatch> BatchAssembler::next_ready() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return cancelled_ || !ready_.empty() || finished_; });
  if (cancelled_ || ready_.empty()) return std::nullopt;
  AssembledBatch batch = std::move(ready_.front());
  ready_.pop_front();
  return batch;
}

void BatchAssembler::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  changed_.notify_all();
}

std::size_t BatchAssembler::ready_batches() {
  std::lock_guard lock(mutex_);
  return ready_.size();
}

}  // namespace tensorcom::pipeline
