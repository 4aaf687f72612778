// GpuFeeder with CUDA: pinned staging, a device buffer pool and a copy stream
// per lane, a feeder thread per source.
//
// Why the batch is copied once on the host: ZeroMQ cannot receive into a
// buffer we choose. zmq_msg_init_data hands ZeroMQ memory for sending; on
// receipt libzmq mallocs each message itself (msg_t::init_size: content_t and
// data in one malloc), and the zguide says so in its own words: "There is no
// way to do zero-copy on receive". So we cannot have it write into pinned
// memory. The alternative, cudaHostRegister on each received message, costs
// a page-table walk and an IOMMU mapping per 4 KiB page on every message (the
// memory is a new malloc each time, so no registration can be reused safely:
// glibc may unmap and remap it), and CUDA documents it as an expensive call;
// a memcpy into an already pinned buffer overlaps the DMA of the previous
// chunk. We stage in chunks (chunk_bytes): while chunk k+1 is memcpy'd, chunk
// k is already on its way to the GPU. One thread's memcpy is several times
// slower than the DMA, so each chunk's memcpy is split over staging_threads
// threads (parallel_copy.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "convert_images.h"
#include "cuda_handles.h"
#include "feeder_common.h"
#include "parallel_copy.h"
#include "tensorcom/gpu/gpu_feeder.h"

namespace tensorcom {

namespace detail {

namespace {

constexpr std::size_t kDeviceAlignment = 256;  // cudaMalloc's alignment; each tensor starts on one
constexpr Milliseconds kSourcePoll{100};       // how often a feeder thread looks up from its source

std::size_t align_up(std::size_t n) { return (n + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment; }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ConvertedType converted_type(DeviceDType dtype) {
  switch (dtype) {
    case DeviceDType::kFloat16: return ConvertedType::kFloat16;
    case DeviceDType::kBFloat16: return ConvertedType::kBFloat16;
    default: return ConvertedType::kFloat32;
  }
}

// A conversion checked against the images it converts, ready to launch:
// what convert_images() and the feeder's batches both need.
struct ConversionPlan {
  Shape converted;         // the result's shape
  std::size_t bytes = 0;   // the result's size
  ImageGeometry geometry;  // of the uint8 (B, H, W, C) input
  ConvertedType type = ConvertedType::kFloat32;
  bool planar = true;  // BCHW, else BHWC
  ChannelAffine affine;
};

// Throws ArgumentError, naming `images` in its message, unless they are
// uint8 (B, H, W, C) with 1 <= C <= 4 and the conversion can be applied.
ConversionPlan plan_conversion(const ImageConversion& conversion, DeviceDType dtype, const Shape& shape,
                               const std::string& images) {
  if (dtype != DeviceDType::kUInt8) {
    throw ArgumentError("image conversion: " + images + " is " + std::string(dtype_name(dtype)) + ", not uint8");
  }
  ConversionPlan plan;
  plan.converted = converted_shape(shape, conversion.layout);
  plan.affine = channel_affine(conversion, shape[3]);
  plan.bytes = static_cast<std::size_t>(checked_nbytes(plan.converted, itemsize(conversion.dtype)).value());
  plan.geometry = {shape[0], shape[1], shape[2], shape[3]};
  plan.type = converted_type(conversion.dtype);
  plan.planar = conversion.layout == ImageLayout::kBCHW;
  return plan;
}

// Queues the planned conversion of the pixels at `in` into `out` on `stream`
// (of the current device).
void launch_conversion(const ConversionPlan& plan, const void* in, void* out, cudaStream_t stream) {
  check_cuda(launch_convert_images(static_cast<const std::uint8_t*>(in), out, plan.geometry, plan.type, plan.planar,
                                   plan.affine, stream),
             "image conversion kernel");
}

}  // namespace

// One device buffer of a lane's pool, and the events that order its reuse.
struct Slot {
  DeviceBuffer raw;                  // the batch's tensors, each at a 256-byte-aligned offset
  DeviceBuffer converted;            // the converted images, when converting
  Event ready;                       // recorded once the copy (and conversion) is done
  std::vector<Event> released;       // recorded on the streams that read the last batch, at its release
  std::size_t pending_released = 0;  // how many of `released` the next copy must wait for
};

// A pinned staging buffer and the event after the device copies out of it.
struct Staging {
  PinnedBuffer host;
  Event copied;
};

// One fed device: its stream, pools, and the queue of batches ready for next().
struct Lane {
  int device = 0;
  Stream stream;
  std::vector<Slot> slots;       // fixed size: prefetch + 1
  std::vector<Staging> staging;  // used round-robin by the lane's one feeder thread
  std::size_t next_staging = 0;

  std::mutex mutex;  // guards what follows
  std::condition_variable changed;
  std::vector<std::size_t> free_slots;
  std::deque<DeviceBatch> ready;
  bool source_ended = false;
  bool stopping = false;
  std::exception_ptr error;

  Lane(int device_ordinal, std::size_t slot_count, std::size_t staging_count) : device(device_ordinal) {
    DeviceScope scope(device);
    stream = Stream::create();
    slots.resize(slot_count);
    for (std::size_t i = 0; i < slot_count; ++i) {
      slots[i].ready = Event::create();
      free_slots.push_back(slot_count - 1 - i);
    }
    staging.resize(staging_count);
    for (Staging& s : staging) s.copied = Event::create();
  }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;
  // Frees the lane's handles with its device current (cudaFree waits for
  // work still using them).
  ~Lane() {
    try {
      DeviceScope scope(device);
      slots.clear();
      staging.clear();
      stream = {};
    } catch (...) {
      // The members free themselves below, with whichever device is current.
    }
  }
};

// Holds one slot out of its lane's pool, from when the feeder takes it until
// the last copy of its DeviceBatch and tensors is gone (or feeding fails);
// its destructor orders the slot's reuse after the readers' work and gives
// it back.
class BatchLease {
 public:
  BatchLease(std::shared_ptr<Lane> lane, std::size_t slot) : lane_(std::move(lane)), slot_(slot) {}
  BatchLease(const BatchLease&) = delete;
  BatchLease& operator=(const BatchLease&) = delete;

  ~BatchLease() {
    Slot& slot = lane_->slots[slot_];
    try {
      DeviceScope scope(lane_->device);
      // No stream named: assume the legacy default stream, which also orders
      // every blocking stream of the device.
      if (consumers_.empty()) consumers_.push_back(nullptr);
      while (slot.released.size() < consumers_.size()) slot.released.push_back(Event::create());
      for (std::size_t i = 0; i < consumers_.size(); ++i) {
        check_cuda(cudaEventRecord(slot.released[i].get(), consumers_[i]), "cudaEventRecord at batch release");
      }
      slot.pending_released = consumers_.size();
    } catch (...) {
      // Cannot order the reuse on the GPU: wait for the whole device instead.
      cudaDeviceSynchronize();
      slot.pending_released = 0;
    }
    std::lock_guard lock(lane_->mutex);
    lane_->free_slots.push_back(slot_);
    lane_->changed.notify_all();
  }

  cudaEvent_t ready() const noexcept { return lane_->slots[slot_].ready.get(); }
  int device() const noexcept { return lane_->device; }

  void add_consumer(cudaStream_t stream) {
    std::lock_guard lock(mutex_);
    if (std::find(consumers_.begin(), consumers_.end(), stream) == consumers_.end()) consumers_.push_back(stream);
  }

 private:
  std::shared_ptr<Lane> lane_;
  std::size_t slot_;
  std::mutex mutex_;
  std::vector<cudaStream_t> consumers_;
};

}  // namespace detail

using detail::check_cuda;
using detail::DeviceScope;

// ---- availability ----

int gpu_device_count() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear it: the next CUDA call should not report it again
    throw UnavailableError(std::string("GPU feeding is not available: cudaGetDeviceCount failed: ") +
                           cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  }
  if (count == 0) throw UnavailableError("GPU feeding is not available: CUDA reports no GPU");
  return count;
}

bool gpu_feeding_available() noexcept {
  try {
    return gpu_device_count() > 0;
  } catch (...) {
    return false;
  }
}

// ---- conversion ----

void convert_images(const DeviceTensor& images, const DeviceTensor& out, const ImageConversion& conversion,
                    GpuStream stream) {
  const detail::ConversionPlan plan =
      detail::plan_conversion(conversion, images.dtype(), images.shape(), "the images tensor");
  if (out.dtype() != conversion.dtype || out.shape() != plan.converted || out.device() != images.device()) {
    throw ArgumentError("convert_images: output is " + std::string(dtype_name(out.dtype())) + " " +
                        format_shape(out.shape()) + " on device " + std::to_string(out.device()) + ", expected " +
                        std::string(dtype_name(conversion.dtype)) + " " + format_shape(plan.converted) + " on device " +
                        std::to_string(images.device()));
  }
  DeviceScope scope(images.device());
  detail::launch_conversion(plan, images.data(), out.data(), static_cast<cudaStream_t>(stream));
}

// ---- DeviceBatch ----

void DeviceBatch::wait(GpuStream stream) const {
  if (!lease_) return;
  DeviceScope scope(lease_->device());
  check_cuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), lease_->ready(), 0), "cudaStreamWaitEvent");
  lease_->add_consumer(static_cast<cudaStream_t>(stream));
}

void DeviceBatch::record_stream(GpuStream stream) const {
  if (lease_) lease_->add_consumer(static_cast<cudaStream_t>(stream));
}

void DeviceBatch::synchronize() const {
  if (lease_) check_cuda(cudaEventSynchronize(lease_->ready()), "cudaEventSynchronize");
}

GpuEvent DeviceBatch::ready_event() const noexcept { return lease_ ? lease_->ready() : nullptr; }

// ---- GpuFeeder ----

class GpuFeeder::Impl {
 public:
  Impl(std::vector<std::unique_ptr<BatchSource>> sources, GpuFeederOptions options)
      : options_(std::move(options)), sources_(std::move(sources)) {
    check_options();
    for (int device : options_.devices) {
      lanes_.push_back(std::make_shared<detail::Lane>(device, options_.prefetch + 1, options_.pinned_buffers));
    }
    const std::size_t staging_threads =
        options_.staging_threads != 0 ? options_.staging_threads : detail::default_staging_threads();
    for (std::size_t i = 0; i < sources_.size(); ++i) {
      copiers_.push_back(std::make_unique<detail::ParallelCopy>(staging_threads));
    }
    for (std::size_t i = 0; i < sources_.size(); ++i) threads_.emplace_back([this, i] { run_source(i); });
  }

  ~Impl() {
    for (auto& lane : lanes_) {
      std::lock_guard lock(lane->mutex);
      lane->stopping = true;
      lane->changed.notify_all();
    }
    for (std::thread& t : threads_) t.join();
    // Batches nobody took hold their lane (and the lane them): drop them
    // outside the lock, which their release takes.
    for (auto& lane : lanes_) {
      std::deque<DeviceBatch> unclaimed;
      {
        std::lock_guard lock(lane->mutex);
        unclaimed.swap(lane->ready);
      }
    }
  }

  std::optional<DeviceBatch> next(std::size_t lane_index, std::optional<Milliseconds> timeout) {
    detail::Lane& lane = lane_at(lane_index);
    std::unique_lock lock(lane.mutex);
    auto has_news = [&] { return !lane.ready.empty() || lane.source_ended; };
    if (timeout) {
      if (!lane.changed.wait_for(lock, *timeout, has_news)) return std::nullopt;
    } else {
      lane.changed.wait(lock, has_news);
    }
    if (!lane.ready.empty()) {
      DeviceBatch batch = std::move(lane.ready.front());
      lane.ready.pop_front();
      return batch;
    }
    if (lane.error) std::rethrow_exception(lane.error);
    return std::nullopt;
  }

  bool finished(std::size_t lane_index) const {
    detail::Lane& lane = lane_at(lane_index);
    std::lock_guard lock(lane.mutex);
    return lane.source_ended && lane.ready.empty();
  }

  std::size_t lanes() const noexcept { return lanes_.size(); }
  const GpuFeederOptions& options() const noexcept { return options_; }
  GpuStream stream(std::size_t lane_index) const { return lane_at(lane_index).stream.get(); }

  GpuFeederStats stats() const {
    std::lock_guard lock(stats_mutex_);
    return stats_;
  }

 private:
  void check_options() {
    const int count = gpu_device_count();  // UnavailableError first: it says more than the rest
    if (options_.devices.empty()) throw ArgumentError("GpuFeeder: no devices to feed");
    for (int device : options_.devices) {
      if (device < 0 || device >= count) {
        throw ArgumentError("GpuFeeder: no CUDA device " + std::to_string(device) + " (CUDA reports " +
                            std::to_string(count) + ")");
      }
    }
    if (options_.pinned_buffers == 0) throw ArgumentError("GpuFeeder: pinned_buffers must be at least 1");
    if (options_.chunk_bytes == 0) options_.chunk_bytes = SIZE_MAX;
    if (options_.convert) detail::check_conversion(*options_.convert);
    if (sources_.size() != 1 && sources_.size() != options_.devices.size()) {
      throw ArgumentError("GpuFeeder: " + std::to_string(sources_.size()) + " sources for " +
                          std::to_string(options_.devices.size()) + " devices: give one source, or one a device");
    }
    for (const auto& source : sources_) {
      if (!source) throw ArgumentError("GpuFeeder: a source is null");
    }
  }

  detail::Lane& lane_at(std::size_t index) const {
    if (index >= lanes_.size()) {
      throw ArgumentError("GpuFeeder: no lane " + std::to_string(index) + " (it feeds " +
                          std::to_string(lanes_.size()) + ")");
    }
    return *lanes_[index];
  }

  bool stopping() const {
    std::lock_guard lock(lanes_.front()->mutex);
    return lanes_.front()->stopping;
  }

  // The feeder thread of source `index`: a single source deals its batches
  // to every lane in turn, else source i feeds lane i.
  void run_source(std::size_t index) {
    std::vector<std::size_t> fed;
    if (sources_.size() == 1) {
      for (std::size_t i = 0; i < lanes_.size(); ++i) fed.push_back(i);
    } else {
      fed.push_back(index);
    }
    BatchSource& source = *sources_[index];
    std::exception_ptr error;
    try {
      std::uint64_t sequence = 0;
      while (!stopping() && !source.ended()) {
        auto start = std::chrono::steady_clock::now();
        std::optional<TensorList> batch = source.next(detail::kSourcePoll);
        add_seconds(&GpuFeederStats::receive_seconds, detail::seconds_since(start));
        if (!batch) continue;
        if (!feed(lanes_[fed[sequence % fed.size()]], std::move(*batch), sequence, *copiers_[index])) break;
        ++sequence;
      }
    } catch (...) {
      error = std::current_exception();
    }
    for (std::size_t i : fed) {
      std::lock_guard lock(lanes_[i]->mutex);
      lanes_[i]->source_ended = true;
      if (error) lanes_[i]->error = error;
      lanes_[i]->changed.notify_all();
    }
  }

  // Takes a free slot of the lane, waiting for one; nothing when stopping.
  std::optional<std::size_t> take_slot(detail::Lane& lane) {
    auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(lane.mutex);
    lane.changed.wait(lock, [&] { return !lane.free_slots.empty() || lane.stopping; });
    add_seconds(&GpuFeederStats::pool_wait_seconds, detail::seconds_since(start));
    if (lane.stopping) return std::nullopt;
    std::size_t slot = lane.free_slots.back();
    lane.free_slots.pop_back();
    return slot;
  }

  // Where one batch goes in a slot, and its conversion.
  struct BatchPlan {
    std::vector<std::size_t> offsets;  // of each tensor in the slot's raw buffer
    std::size_t raw_bytes = 0;
    std::optional<detail::ConversionPlan> conversion;  // of tensor options_.convert->tensor
  };

  // Stages `batch` and queues its copy (and conversion) to the lane's device.
  // Returns false when the feeder is stopping. Throws ArgumentError for a
  // batch that the conversion cannot take, Error if CUDA fails.
  bool feed(const std::shared_ptr<detail::Lane>& lane, TensorList batch, std::uint64_t sequence,
            detail::ParallelCopy& copier) {
    DeviceScope scope(lane->device);
    const BatchPlan plan = plan_batch(batch, sequence);
    const std::optional<std::size_t> slot_index = take_slot(*lane);
    if (!slot_index) return false;
    // The lease owns the slot from here: it goes back to the pool when the
    // batch's last tensor is gone, or at once if a step below throws.
    auto lease = std::make_shared<detail::BatchLease>(lane, *slot_index);
    detail::Slot& slot = lane->slots[*slot_index];
    grow_slot(slot, plan);
    wait_for_release(slot, lane->stream.get());
    stage_and_copy(*lane, batch, plan, slot.raw.data(), copier);
    std::vector<DeviceTensor> tensors = device_tensors(*lane, slot, batch, plan, lease);
    check_cuda(cudaEventRecord(slot.ready.get(), lane->stream.get()), "cudaEventRecord after a batch");
    enqueue(*lane, std::move(batch), DeviceBatch(std::move(tensors), lane->device, sequence, std::move(lease)));
    return true;
  }

  // Lays the batch's tensors out at aligned offsets and checks its conversion.
  BatchPlan plan_batch(const TensorList& batch, std::uint64_t sequence) const {
    BatchPlan plan;
    for (const Tensor& t : batch) {
      plan.offsets.push_back(plan.raw_bytes);
      plan.raw_bytes = detail::align_up(plan.raw_bytes + t.nbytes());
    }
    if (!options_.convert) return plan;
    const ImageConversion& conversion = *options_.convert;
    if (conversion.tensor >= batch.size()) {
      throw ArgumentError("image conversion: batch " + std::to_string(sequence) + " has " +
                          std::to_string(batch.size()) + " tensors, no tensor " + std::to_string(conversion.tensor));
    }
    const Tensor& images = batch[conversion.tensor];
    plan.conversion = detail::plan_conversion(
        conversion, device_dtype(images.dtype()), images.shape(),
        "tensor " + std::to_string(conversion.tensor) + " of batch " + std::to_string(sequence));
    return plan;
  }

  // Makes the slot's device buffers large enough for the batch.
  static void grow_slot(detail::Slot& slot, const BatchPlan& plan) {
    const std::size_t converted_bytes = plan.conversion ? plan.conversion->bytes : 0;
    if (slot.raw.size() >= plan.raw_bytes && slot.converted.size() >= converted_bytes) return;
    // The old buffers may still be read behind the release events.
    for (std::size_t i = 0; i < slot.pending_released; ++i) {
      check_cuda(cudaEventSynchronize(slot.released[i].get()), "cudaEventSynchronize before growing a buffer");
    }
    if (slot.raw.size() < plan.raw_bytes) {
      slot.raw = {};
      slot.raw = detail::DeviceBuffer::allocate(plan.raw_bytes);
    }
    if (slot.converted.size() < converted_bytes) {
      slot.converted = {};
      slot.converted = detail::DeviceBuffer::allocate(converted_bytes);
    }
  }

  // Orders the lane's next copies into the slot after the work of those who
  // read its last batch.
  static void wait_for_release(detail::Slot& slot, cudaStream_t stream) {
    for (std::size_t i = 0; i < slot.pending_released; ++i) {
      check_cuda(cudaStreamWaitEvent(stream, slot.released[i].get(), 0), "cudaStreamWaitEvent on a released batch");
    }
    slot.pending_released = 0;
  }

  // Copies the batch into the lane's next pinned buffer and queues its copy
  // to `device` on the lane's stream.
  void stage_and_copy(detail::Lane& lane, const TensorList& batch, const BatchPlan& plan, std::byte* device,
                      detail::ParallelCopy& copier) {
    detail::Staging& staging = lane.staging[lane.next_staging];
    lane.next_staging = (lane.next_staging + 1) % lane.staging.size();
    check_cuda(cudaEventSynchronize(staging.copied.get()), "cudaEventSynchronize on a staging buffer");
    if (staging.host.size() < plan.raw_bytes) {
      staging.host = {};
      staging.host = detail::PinnedBuffer::allocate(plan.raw_bytes);
    }
    const auto start = std::chrono::steady_clock::now();
    copy_in_chunks(batch, plan.offsets, staging.host.data(), device, lane.stream.get(), copier);
    check_cuda(cudaEventRecord(staging.copied.get(), lane.stream.get()), "cudaEventRecord after a copy");
    add_seconds(&GpuFeederStats::staging_seconds, detail::seconds_since(start));
  }

  // The batch's tensors on the device, converting the images on the lane's
  // stream; each holds the lease.
  std::vector<DeviceTensor> device_tensors(detail::Lane& lane, detail::Slot& slot, const TensorList& batch,
                                           const BatchPlan& plan, const std::shared_ptr<detail::BatchLease>& lease) {
    std::vector<DeviceTensor> tensors;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const Tensor& t = batch[i];
      std::byte* raw = slot.raw.data() + plan.offsets[i];
      if (plan.conversion && i == options_.convert->tensor) {
        detail::launch_conversion(*plan.conversion, raw, slot.converted.data(), lane.stream.get());
        tensors.emplace_back(options_.convert->dtype, plan.conversion->converted, lane.device, slot.converted.data(),
                             lease, t.info());
      } else {
        tensors.emplace_back(device_dtype(t.dtype()), t.shape(), lane.device, raw, lease, t.info());
      }
    }
    return tensors;
  }

  // Hands the device batch to next() and counts it.
  void enqueue(detail::Lane& lane, TensorList batch, DeviceBatch device_batch) {
    const std::uint64_t bytes = batch_bytes(batch);
    batch.clear();  // the received message goes back before we wait on anything else
    {
      std::lock_guard lock(lane.mutex);
      lane.ready.push_back(std::move(device_batch));
      lane.changed.notify_all();
    }
    std::lock_guard lock(stats_mutex_);
    ++stats_.batches;
    stats_.bytes += bytes;
  }

  // memcpy's every tensor into pinned memory and queues host-to-device
  // copies of what is staged each time chunk_bytes have accumulated.
  void copy_in_chunks(const TensorList& batch, const std::vector<std::size_t>& offsets, std::byte* host,
                      std::byte* device, cudaStream_t stream, detail::ParallelCopy& copier) const {
    const std::size_t chunk = options_.chunk_bytes;
    std::size_t sent = 0;  // bytes [0, sent) are queued for the device
    auto send_up_to = [&](std::size_t end) {
      if (end <= sent) return;
      check_cuda(cudaMemcpyAsync(device + sent, host + sent, end - sent, cudaMemcpyHostToDevice, stream),
                 "cudaMemcpyAsync of " + std::to_string(end - sent) + " bytes to the device");
      sent = end;
    };
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const std::byte* src = batch[i].data();
      const std::size_t n = batch[i].nbytes();
      for (std::size_t done = 0; done < n;) {
        const std::size_t take = std::min(n - done, chunk);
        copier.copy(host + offsets[i] + done, src + done, take);
        done += take;
        if (offsets[i] + done - sent >= chunk) send_up_to(offsets[i] + done);
      }
    }
    if (!batch.empty()) send_up_to(offsets.back() + batch.back().nbytes());
  }

  void add_seconds(double GpuFeederStats::*field, double seconds) {
    std::lock_guard lock(stats_mutex_);
    stats_.*field += seconds;
  }

  GpuFeederOptions options_;
  std::vector<std::unique_ptr<BatchSource>> sources_;
  std::vector<std::unique_ptr<detail::ParallelCopy>> copiers_;  // one a source, for its feeder thread
  std::vector<std::shared_ptr<detail::Lane>> lanes_;
  std::vector<std::thread> threads_;
  mutable std::mutex stats_mutex_;
  GpuFeederStats stats_;
};

GpuFeeder::GpuFeeder(std::vector<std::unique_ptr<BatchSource>> sources, GpuFeederOptions options)
    : impl_(std::make_unique<Impl>(std::move(sources), std::move(options))) {}
GpuFeeder::GpuFeeder(GpuFeeder&&) noexcept = default;
GpuFeeder& GpuFeeder::operator=(GpuFeeder&&) noexcept = default;
GpuFeeder::~GpuFeeder() = default;

std::optional<DeviceBatch> GpuFeeder::next(std::size_t lane, std::optional<Milliseconds> timeout) {
  return impl_->next(lane, timeout);
}
bool GpuFeeder::finished(std::size_t lane) const { return impl_->finished(lane); }
std::size_t GpuFeeder::lanes() const noexcept { return impl_->lanes(); }
const GpuFeederOptions& GpuFeeder::options() const noexcept { return impl_->options(); }
GpuFeederStats GpuFeeder::stats() const { return impl_->stats(); }
GpuStream GpuFeeder::stream(std::size_t lane) const { return impl_->stream(lane); }

}  // namespace tensorcom
