// GpuFeeder: receives batches on the host and delivers them to one or more
// GPUs as DeviceTensors.
//
//   tensorcom::GpuFeederOptions options;
//   options.devices = {0, 1};
//   options.convert = tensorcom::ImageConversion{};  // uint8 BHWC -> float32 BCHW, ImageNet mean/std
//   tensorcom::GpuFeeder feeder(tensorcom::Connection({"zsub://127.0.0.1:7880"}), options);
//   // one thread per GPU:
//   while (auto batch = feeder.next(lane)) {
//     batch->wait(my_stream);                  // the GPU waits; the host does not
//     train(my_stream, (*batch)[0], (*batch)[1]);
//   }                                          // the batch's memory goes back to the pool
//
// For each device (a "lane") the feeder keeps a bounded pool: `prefetch + 1`
// device buffers and `pinned_buffers` pinned (page-locked) host buffers. A
// feeder thread per source copies each received batch into a pinned buffer
// (one memcpy per tensor), then copies it to a free device buffer with
// cudaMemcpyAsync on the lane's own stream, runs the optional image conversion
// on that stream and records an event; next() hands out the batch with that
// event. Memory is bounded by the pools: when the trainer holds every device
// buffer of a lane, that lane's feeder thread waits.
//
// This header includes nothing of CUDA (streams and events are void* here).
// In a build without CUDA everything compiles; gpu_feeding_available() is
// false and constructing a GpuFeeder throws UnavailableError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorcom/transport/connection.h"
#include "tensorcom/gpu/device_tensor.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/codec/batch_layout.h"
#include "tensorcom/codec/tensor.h"

namespace tensorcom {

// A cudaStream_t, opaque here (cast it back in CUDA code). nullptr is the
// legacy default stream.
using GpuStream = void*;
// A cudaEvent_t, opaque here.
using GpuEvent = void*;

// True when this build has CUDA and the process sees at least one GPU.
[[nodiscard]] bool gpu_feeding_available() noexcept;
// Returns: the number of GPUs CUDA reports (at least 1).
// Throws: UnavailableError when built without CUDA, or when CUDA reports no
//   device or fails (the message names CUDA's error).
[[nodiscard]] int gpu_device_count();

// On-GPU conversion of one tensor of each batch: uint8 (B, H, W, C) pixels,
// 1 <= C <= 4, to floats (x / 255 - mean[c]) / std[c] (channel_affine in
// batch_layout.h), in one kernel.
struct ImageConversion {
  std::size_t tensor = 0;                           // which tensor of the batch holds the images
  DeviceDType dtype = DeviceDType::kFloat32;        // kFloat16, kBFloat16 or kFloat32
  ImageLayout layout = ImageLayout::kBCHW;          // of the result: kBCHW (NCHW) or kBHWC (NHWC)
  std::vector<float> mean{0.485f, 0.456f, 0.406f};  // per channel (ImageNet's), or one value for all
  std::vector<float> std{0.229f, 0.224f, 0.225f};   // likewise; every value non-zero
};

// The shape of the converted images for uint8 images of shape (B, H, W, C).
// Throws ArgumentError unless `images` is 4-d with 1 <= C <= 4 and layout is
// kBCHW or kBHWC.
[[nodiscard]] Shape converted_shape(const Shape& images, ImageLayout layout);

// Converts uint8 (B, H, W, C) `images` into `out` (the dtype and
// converted_shape of `conversion`, on the same device) on `stream`; returns
// once the kernel is queued. Throws ArgumentError for mismatched tensors or a
// bad conversion, UnavailableError without CUDA, Error if the launch fails.
void convert_images(const DeviceTensor& images, const DeviceTensor& out, const ImageConversion& conversion,
                    GpuStream stream);

namespace detail {
class BatchLease;  // defined in the implementation
}

// A batch on one GPU. The tensors are valid on the GPU once the batch's
// event has completed: call wait(stream) before queueing work that reads
// them, or synchronize(). Copies share the batch; its memory returns to the
// feeder's pool when the last copy of the batch and of its tensors is gone,
// after work queued before that on the streams passed to wait() or
// record_stream() (or, if none was, on the device's legacy default stream).
// Thread safety: a batch may be used from any one thread at a time.
class DeviceBatch {
 public:
  DeviceBatch() = default;
  // Made by GpuFeeder.
  DeviceBatch(std::vector<DeviceTensor> tensors, int device, std::uint64_t sequence,
              std::shared_ptr<detail::BatchLease> lease);

  [[nodiscard]] std::size_t size() const noexcept { return tensors_.size(); }
  [[nodiscard]] bool empty() const noexcept { return tensors_.empty(); }
  [[nodiscard]] const DeviceTensor& operator[](std::size_t i) const { return tensors_.at(i); }
  [[nodiscard]] const std::vector<DeviceTensor>& tensors() const noexcept { return tensors_; }
  [[nodiscard]] auto begin() const noexcept { return tensors_.begin(); }
  [[nodiscard]] auto end() const noexcept { return tensors_.end(); }
  // The CUDA device ordinal of every tensor.
  [[nodiscard]] int device() const noexcept { return device_; }
  // The batch's number in the order its source produced it, from 0.
  [[nodiscard]] std::uint64_t sequence() const noexcept { return sequence_; }

  // Makes `stream` (on this batch's device) wait, on the GPU, for the data,
  // and records it as a stream that reads the batch. Throws Error if CUDA fails.
  void wait(GpuStream stream) const;
  // Records another stream that reads the batch, without waiting on it.
  void record_stream(GpuStream stream) const;
  // Blocks the calling thread until the data is on the GPU.
  void synchronize() const;
  // The event that completes when the data is on the GPU (a cudaEvent_t).
  [[nodiscard]] GpuEvent ready_event() const noexcept;

 private:
  std::vector<DeviceTensor> tensors_;
  int device_ = -1;
  std::uint64_t sequence_ = 0;
  std::shared_ptr<detail::BatchLease> lease_;
};

// Where a feeder thread reads host batches from. Called from that thread only.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next batch, or nothing if none came within `wait`. May throw (the
  // error reaches the trainer through GpuFeeder::next).
  [[nodiscard]] virtual std::optional<TensorList> next(Milliseconds wait) = 0;
  // True once the source has no more batches.
  [[nodiscard]] virtual bool ended() const = 0;
};

// A source reading `connection`: it ends after the connection's
// options().total batches, and throws TimeoutError naming the URLs when the
// connection is silent past its options().timeout.
[[nodiscard]] std::unique_ptr<BatchSource> connection_source(Connection connection);

struct GpuFeederOptions {
  std::vector<int> devices{0};             // CUDA ordinals fed, one lane each (an ordinal may repeat)
  std::size_t prefetch = 2;                // batches a lane copies ahead: prefetch + 1 device buffers a lane
  std::size_t pinned_buffers = 2;          // pinned staging buffers a lane (at least 1)
  std::size_t chunk_bytes = 8 << 20;       // host copies and device copies overlap in chunks of this size
  std::size_t staging_threads = 0;         // threads a source's copy into pinned memory is split over
                                           // (0: half the CPUs, 1 to 8)
  std::optional<ImageConversion> convert;  // convert one tensor of each batch on the GPU (none: raw tensors)
};

// What a feeder has done so far, summed over its lanes.
struct GpuFeederStats {
  std::uint64_t batches = 0;     // batches queued to the GPUs
  std::uint64_t bytes = 0;       // host bytes copied to the GPUs
  double receive_seconds = 0;    // feeder threads waiting on their sources
  double staging_seconds = 0;    // feeder threads copying into pinned memory
  double pool_wait_seconds = 0;  // feeder threads waiting for a free buffer (the trainer is slower)
};

class GpuFeeder {
 public:
  // One source feeds every lane round-robin (batch k goes to lane k % lanes);
  // or one source per lane (sources.size() == options.devices.size()).
  // Allocates nothing yet: buffers are sized by the first batch (and grown for
  // a larger one). Starts one feeder thread per source.
  // Throws: UnavailableError without CUDA or without a usable GPU (naming
  //   CUDA's error); ArgumentError for bad options or a source count that
  //   fits neither case; Error if CUDA fails.
  GpuFeeder(std::vector<std::unique_ptr<BatchSource>> sources, GpuFeederOptions options = {});
  // One Connection feeding every lane round-robin.
  explicit GpuFeeder(Connection connection, GpuFeederOptions options = {});
  // One Connection per lane.
  GpuFeeder(std::vector<Connection> connections, GpuFeederOptions options = {});
  // Brace-expands `urls`; with as many URLs as options.devices, a Connection
  // per lane, else one Connection on all of them feeding every lane.
  [[nodiscard]] static GpuFeeder from_urls(std::span<const std::string> urls, ConnectionOptions connection_options,
                                           GpuFeederOptions options = {});
  GpuFeeder(GpuFeeder&&) noexcept;
  GpuFeeder& operator=(GpuFeeder&&) noexcept;
  // Stops the feeder threads; batches handed out stay valid.
  ~GpuFeeder();

  // The next batch of lane `lane` (an index into options.devices), waiting at
  // most `timeout` (none: until one comes or the lane's source ends).
  // Returns nothing on timeout or once the source ended and its batches are
  // all handed out (then finished(lane) is true).
  // Throws the error that stopped the lane's source (the same on every later
  // call), ArgumentError for a bad lane.
  // Thread safety: lanes may be served to different threads concurrently;
  // one thread at a time per lane.
  [[nodiscard]] std::optional<DeviceBatch> next(std::size_t lane = 0,
                                                std::optional<Milliseconds> timeout = std::nullopt);
  // True once lane's source has ended and all its batches were handed out.
  [[nodiscard]] bool finished(std::size_t lane = 0) const;
  [[nodiscard]] std::size_t lanes() const noexcept;
  [[nodiscard]] const GpuFeederOptions& options() const noexcept;
  [[nodiscard]] GpuFeederStats stats() const;
  // The stream lane's copies and conversions run on (a cudaStream_t).
  [[nodiscard]] GpuStream stream(std::size_t lane = 0) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorcom
