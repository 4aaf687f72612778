// gpu-feed-bandwidth [--mb N] [--batches N] [--device N]: the GPU feeder's
// host-to-device rate against a plain cudaMemcpyAsync from pinned memory of
// the same size, measured in the same run (target: ratio >= 0.9), then
// batches/s from a local sender over ipc into GPU tensors (raw and converted
// to float16 NCHW) against the same Connection received without a GPU.
// Exits 77 without a GPU.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "tensorcom/gpu/gpu_feeder.h"

using namespace tensorcom;
using Clock = std::chrono::steady_clock;

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(status));
}

double seconds(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// An ImageNet-like batch of about `bytes` bytes: uint8 (B, 224, 224, 3) and int32 labels.
TensorList make_batch(std::size_t bytes) {
  const std::int64_t image = 224 * 224 * 3;
  const std::int64_t b = std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes) / image);
  Tensor images = Tensor::allocate(DType::kUInt8, {b, 224, 224, 3});
  for (std::size_t i = 0; i < images.nbytes(); i += 4096) images.data()[i] = std::byte{1};  // touch every page
  return {images, Tensor::zeros(DType::kInt32, {b})};
}

// GB/s of plain cudaMemcpyAsync from one pinned buffer to one device buffer.
double plain_copy_rate(std::size_t bytes, int count) {
  void *host = nullptr, *device = nullptr;
  cudaStream_t stream = nullptr;
  check(cudaHostAlloc(&host, bytes, cudaHostAllocPortable), "cudaHostAlloc");
  check(cudaMalloc(&device, bytes), "cudaMalloc");
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  std::memset(host, 1, bytes);
  for (int i = 0; i < 3; ++i) check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream), "copy");
  check(cudaStreamSynchronize(stream), "sync");
  auto start = Clock::now();
  for (int i = 0; i < count; ++i) check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream), "copy");
  check(cudaStreamSynchronize(stream), "sync");
  const double s = seconds(start);
  cudaStreamDestroy(stream);
  cudaFree(device);
  cudaFreeHost(host);
  return static_cast<double>(bytes) * count / s / 1e9;
}

// Hands out the same few received-like (pageable) batches again and again.
class RepeatSource final : public BatchSource {
 public:
  RepeatSource(std::size_t bytes, int count) : count_(count) {
    for (int i = 0; i < 2; ++i) batches_.push_back(make_batch(bytes));
  }
  std::optional<TensorList> next(Milliseconds) override { return batches_[given_++ % batches_.size()]; }
  bool ended() const override { return given_ >= count_; }

 private:
  std::vector<TensorList> batches_;
  int count_;
  int given_ = 0;
};

struct FeedResult {
  double gb_per_s = 0, batches_per_s = 0;
  GpuFeederStats stats;
};

// Drains lane 0 of the feeder: waits for each batch on the GPU, releases it.
FeedResult drain(GpuFeeder& feeder, int warmup) {
  FeedResult r;
  int batches = 0;
  Clock::time_point start;
  while (auto batch = feeder.next(0, Milliseconds(30000))) {
    batch->synchronize();
    if (batches == warmup) start = Clock::now();  // timing covers the batches after this one
    ++batches;
  }
  if (!feeder.finished(0)) throw TimeoutError("the feeder stalled");
  const double s = seconds(start);
  const int timed = batches - warmup - 1;
  r.stats = feeder.stats();
  // Host bytes (a converted batch is larger on the GPU than on the wire).
  const double per_batch = static_cast<double>(r.stats.bytes) / static_cast<double>(r.stats.batches);
  r.gb_per_s = per_batch * timed / s / 1e9;
  r.batches_per_s = timed / s;
  return r;
}

FeedResult feed_from_memory(std::size_t bytes, int count, int device, std::size_t staging_threads) {
  std::vector<std::unique_ptr<BatchSource>> sources;
  sources.push_back(std::make_unique<RepeatSource>(bytes, count));
  GpuFeederOptions options;
  options.devices = {device};
  options.prefetch = 3;
  options.staging_threads = staging_threads;
  GpuFeeder feeder(std::move(sources), options);
  return drain(feeder, 3);
}

// A sender thread pushes `count` batches over ipc; the receiver is either a
// GpuFeeder (with or without conversion) or a plain Connection.
FeedResult feed_from_socket(std::size_t bytes, int count, int device, const std::string& url, bool gpu, bool convert) {
  ConnectionOptions receive;
  receive.total = count;
  receive.timeout = Milliseconds(30000);
  std::thread sender([&] {
    Connection push({"zpush+ipc://" + url});
    TensorList batch = make_batch(bytes);
    for (int i = 0; i < count; ++i) push.send(batch);
  });
  FeedResult r;
  try {
    if (gpu) {
      GpuFeederOptions options;
      options.devices = {device};
      options.prefetch = 3;
      if (convert) {
        options.convert = ImageConversion{};
        options.convert->dtype = DeviceDType::kFloat16;
      }
      GpuFeeder feeder(Connection({"zpull+ipc://" + url}, receive), options);
      r = drain(feeder, 3);
    } else {
      Connection pull({"zpull+ipc://" + url}, receive);
      std::uint64_t total = 0;
      Clock::time_point start;
      for (int i = 0; i < count; ++i) {
        auto batch = pull.recv(Milliseconds(30000));
        if (!batch) throw TimeoutError("no batch");
        if (i == 3) start = Clock::now();
        if (i > 3) total += batch_bytes(*batch);
      }
      const double s = seconds(start);
      r.gb_per_s = static_cast<double>(total) / s / 1e9;
      r.batches_per_s = (count - 4) / s;
    }
  } catch (...) {
    sender.join();
    throw;
  }
  sender.join();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mb = 38;  // one 256 x 224 x 224 x 3 batch is 38.5 MB
  int count = 100, device = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string arg = argv[i];
    if (arg == "--mb")
      mb = std::strtoull(argv[i + 1], nullptr, 10);
    else if (arg == "--batches")
      count = std::atoi(argv[i + 1]);
    else if (arg == "--device")
      device = std::atoi(argv[i + 1]);
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("gpu-feed-bandwidth: no GPU: skipped\n");
    return 77;
  }
  try {
    check(cudaSetDevice(device), "cudaSetDevice");
    const std::size_t bytes = mb << 20;
    const std::size_t batch = batch_bytes(make_batch(bytes));
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    std::printf("device %d: %s; batches of %.1f MB, %d of them\n", device, prop.name, batch / 1e6, count);

    const double plain = plain_copy_rate(batch, count);
    std::printf("plain cudaMemcpyAsync from pinned:      %7.2f GB/s\n", plain);
    // The default staging threads first (the figure that counts), then
    // how the rate grows with them.
    std::vector<std::size_t> thread_counts{0, 1, 2, 4, 8};
    for (std::size_t threads : thread_counts) {
      FeedResult memory = feed_from_memory(bytes, count + 4, device, threads);
      const std::string label =
          threads == 0 ? "default staging threads" : std::to_string(threads) + " staging thread(s)";
      std::printf("feeder, host batches -> GPU, %-24s %7.2f GB/s  %7.1f batches/s  ratio %.2f%s\n",
                  (label + ":").c_str(), memory.gb_per_s, memory.batches_per_s, memory.gb_per_s / plain,
                  threads == 0 ? " (target >= 0.9)" : "");
      std::printf("  feeder thread: staging %.2f s, waiting for buffers %.2f s, for the source %.2f s\n",
                  memory.stats.staging_seconds, memory.stats.pool_wait_seconds, memory.stats.receive_seconds);
    }

    const std::string url =
        (std::filesystem::temp_directory_path() / ("gpu-feed-bandwidth-" + std::to_string(::getpid()))).string();
    FeedResult host = feed_from_socket(bytes, count + 4, device, url + "-host", false, false);
    FeedResult raw = feed_from_socket(bytes, count + 4, device, url + "-raw", true, false);
    FeedResult half = feed_from_socket(bytes, count + 4, device, url + "-half", true, true);
    std::printf("local sender (ipc) -> Connection, host: %7.2f GB/s  %7.1f batches/s\n", host.gb_per_s,
                host.batches_per_s);
    std::printf("local sender (ipc) -> GPU tensors:      %7.2f GB/s  %7.1f batches/s  ratio to host %.2f\n",
                raw.gb_per_s, raw.batches_per_s, raw.batches_per_s / host.batches_per_s);
    std::printf("  ... converted to float16 NCHW:        %7.2f GB/s  %7.1f batches/s  ratio to host %.2f\n",
                half.gb_per_s, half.batches_per_s, half.batches_per_s / host.batches_per_s);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "gpu-feed-bandwidth: %s\n", e.what());
    return 1;
  }
}
