// cpp-trainer: trains a small MLP image classifier on N GPUs from a tensorcom
// server, data-parallel: each GPU gets whole batches from one GpuFeeder, the
// gradients are averaged across GPUs every step, and every replica applies
// the same update. The feeder converts uint8 BHWC images to float32 NCHW,
// normalised, on the GPU; the model average-pools them to S x S cells and
// runs pooled -> hidden (ReLU) -> classes with cuBLAS.
//
//   serve-imagenet-shards -u 'shards/train-{000..099}.tar' zpush+ipc:///tmp/feed &
//   cpp-trainer --gpus 2 --steps 500 zpull+ipc:///tmp/feed
//
// Prints the mean loss over the last steps (it falls) and images/s, then
// checks that each batch of its source(s) reached exactly one lane, by the
// feeder's batch numbers. --lanes N trains N replicas on the GPUs in turn
// (lane i on GPU i % gpus): two lanes on one GPU exercise the multi-lane
// feeding and the gradient exchange without a second GPU.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mlp_kernels.h"
#include "tensorcom/transport/brace.h"
#include "tensorcom/gpu/gpu_feeder.h"

using namespace tensorcom;

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(status));
}
void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw Error(std::string(what) + ": " + cublasGetStatusString(status));
}

struct Options {
  std::vector<std::string> urls;
  int gpus = 1;
  int lanes = 0;  // replicas, one feeder lane each (0: one a GPU)
  int steps = 500;
  int hidden = 512;
  int classes = 1000;
  int cells = 32;  // images are average-pooled to cells x cells before the MLP
  float lr = 0.02f;
  float momentum = 0.9f;
  float weight_decay = 1e-4f;
  int report = 20;
  int timeout_s = 60;
};

// Device memory of n floats, freed with the owner.
class Floats {
 public:
  Floats() = default;
  explicit Floats(std::size_t n) : n_(n) {
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(float)), "cudaMalloc");
    p_.reset(static_cast<float*>(p));
  }
  float* get() const { return p_.get(); }
  std::size_t size() const { return n_; }

 private:
  struct Free {
    void operator()(float* p) const { cudaFree(p); }
  };
  std::unique_ptr<float, Free> p_;
  std::size_t n_ = 0;
};

// One GPU's copy of the model, its gradients and its scratch space.
class Replica {
 public:
  Replica(int device, const Options& o, int features, const std::vector<float>& initial)
      : device_(device), o_(o), features_(features) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasCreate(&blas_), "cublasCreate");
    check(cublasSetStream(blas_, stream_), "cublasSetStream");
    params_ = Floats(initial.size());
    grads_ = Floats(initial.size());
    velocity_ = Floats(initial.size());
    incoming_ = Floats(initial.size());
    loss_ = Floats(1);
    check(cudaMemcpy(params_.get(), initial.data(), initial.size() * sizeof(float), cudaMemcpyHostToDevice), "upload");
    check(cudaMemset(velocity_.get(), 0, initial.size() * sizeof(float)), "cudaMemset");
  }
  ~Replica() {
    cudaSetDevice(device_);
    cublasDestroy(blas_);
    cudaStreamDestroy(stream_);
  }
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  float* grads() const { return grads_.get(); }
  float* incoming() const { return incoming_.get(); }
  std::size_t parameters() const { return params_.size(); }

  // Forward and backward on one batch; returns once the gradients are ready.
  // Returns the batch's mean loss.
  float step(const DeviceBatch& batch) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    const DeviceTensor& images = batch[0];
    const DeviceTensor& labels = batch[1];
    if (images.dtype() != DeviceDType::kFloat32 || images.ndim() != 4 || labels.dtype() != DeviceDType::kInt32 ||
        labels.ndim() != 1 || labels.dim(0) != images.dim(0)) {
      throw ArgumentError("expected float32 images (B, C, H, W) and int32 labels (B,)");
    }
    const int b = static_cast<int>(images.dim(0)), c = static_cast<int>(images.dim(1));
    if (c * o_.cells * o_.cells != features_) throw ArgumentError("images of " + std::to_string(c) + " channels");
    reserve(b);
    batch.wait(stream_);  // the GPU waits for the copy; released after this stream's work
    const int h = o_.hidden, k = o_.classes, f = features_;
    float* w1 = params_.get();
    float* b1 = w1 + static_cast<std::size_t>(h) * f;
    float* w2 = b1 + h;
    float* b2 = w2 + static_cast<std::size_t>(k) * h;
    float* dw1 = grads_.get();
    float* db1 = dw1 + static_cast<std::size_t>(h) * f;
    float* dw2 = db1 + h;
    float* db2 = dw2 + static_cast<std::size_t>(k) * h;
    const float one = 1, zero = 0;

    mlp::average_pool(static_cast<const float*>(images.data()), x_.get(), b, c, static_cast<int>(images.dim(2)),
                      static_cast<int>(images.dim(3)), o_.cells, stream_);
    check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, h, b, f, &one, w1, h, x_.get(), f, &zero, hid_.get(), h),
          "W1 x");
    mlp::add_bias(hid_.get(), b1, h, b, true, stream_);
    check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, k, b, h, &one, w2, k, hid_.get(), h, &zero, logits_.get(), k),
          "W2 h");
    mlp::add_bias(logits_.get(), b2, k, b, false, stream_);
    check(cudaMemsetAsync(loss_.get(), 0, sizeof(float), stream_), "cudaMemsetAsync");
    mlp::softmax_cross_entropy(logits_.get(), static_cast<const int*>(labels.data()), loss_.get(), k, b, stream_);
    // logits_ now holds dL/dlogits.
    check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, k, h, b, &one, logits_.get(), k, hid_.get(), h, &zero, dw2, k),
          "dW2");
    mlp::row_sums(logits_.get(), db2, k, b, stream_);
    check(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, h, b, k, &one, w2, k, logits_.get(), k, &zero, dhid_.get(), h),
          "dh");
    mlp::relu_backward(dhid_.get(), hid_.get(), h * b, stream_);
    check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, h, f, b, &one, dhid_.get(), h, x_.get(), f, &zero, dw1, h),
          "dW1");
    mlp::row_sums(dhid_.get(), db1, h, b, stream_);
    float loss = 0;
    check(cudaMemcpyAsync(&loss, loss_.get(), sizeof loss, cudaMemcpyDeviceToHost, stream_), "loss");
    check(cudaGetLastError(), "kernel launch");
    check(cudaStreamSynchronize(stream_), "step");
    return loss;
  }

  // Applies the summed gradients of `replicas` GPUs.
  void update(int replicas) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    mlp::sgd(params_.get(), velocity_.get(), grads_.get(), static_cast<int>(params_.size()), o_.lr, o_.momentum,
             o_.weight_decay, 1.0f / static_cast<float>(replicas), stream_);
    check(cudaGetLastError(), "sgd launch");
    check(cudaStreamSynchronize(stream_), "update");
  }

 private:
  void reserve(int batch) {
    if (batch <= capacity_) return;
    x_ = Floats(static_cast<std::size_t>(features_) * batch);
    hid_ = Floats(static_cast<std::size_t>(o_.hidden) * batch);
    dhid_ = Floats(static_cast<std::size_t>(o_.hidden) * batch);
    logits_ = Floats(static_cast<std::size_t>(o_.classes) * batch);
    capacity_ = batch;
  }

  int device_;
  const Options& o_;
  int features_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  Floats params_, grads_, velocity_, incoming_, loss_, x_, hid_, dhid_, logits_;
  int capacity_ = 0;
};

// He-initialised weights, zero biases, in the replicas' flat layout.
std::vector<float> initial_parameters(const Options& o, int features) {
  const std::size_t h = o.hidden, k = o.classes, f = features;
  std::vector<float> p(h * f + h + k * h + k, 0.0f);
  std::mt19937 rng(0);
  std::normal_distribution<float> w1(0.0f, std::sqrt(2.0f / f)), w2(0.0f, std::sqrt(2.0f / h));
  for (std::size_t i = 0; i < h * f; ++i) p[i] = w1(rng);
  for (std::size_t i = 0; i < k * h; ++i) p[h * f + h + i] = w2(rng);
  return p;
}

// Sums every replica's gradients into replica 0's, then copies the sum back.
void all_reduce(std::vector<std::unique_ptr<Replica>>& replicas) {
  Replica& root = *replicas[0];
  const std::size_t bytes = root.parameters() * sizeof(float);
  check(cudaSetDevice(root.device()), "cudaSetDevice");
  for (std::size_t i = 1; i < replicas.size(); ++i) {
    check(cudaMemcpyPeerAsync(root.incoming(), root.device(), replicas[i]->grads(), replicas[i]->device(), bytes,
                              root.stream()),
          "gradients to GPU 0");
    mlp::accumulate(root.grads(), root.incoming(), static_cast<int>(root.parameters()), root.stream());
  }
  for (std::size_t i = 1; i < replicas.size(); ++i) {
    check(cudaMemcpyPeerAsync(replicas[i]->grads(), replicas[i]->device(), root.grads(), root.device(), bytes,
                              root.stream()),
          "gradients from GPU 0");
  }
  check(cudaStreamSynchronize(root.stream()), "all-reduce");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw ArgumentError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--gpus")
      o.gpus = std::atoi(value());
    else if (arg == "--lanes")
      o.lanes = std::atoi(value());
    else if (arg == "--steps")
      o.steps = std::atoi(value());
    else if (arg == "--hidden")
      o.hidden = std::atoi(value());
    else if (arg == "--classes")
      o.classes = std::atoi(value());
    else if (arg == "--cells")
      o.cells = std::atoi(value());
    else if (arg == "--lr")
      o.lr = std::strtof(value(), nullptr);
    else if (arg == "--momentum")
      o.momentum = std::strtof(value(), nullptr);
    else if (arg == "--report")
      o.report = std::atoi(value());
    else if (arg == "--timeout")
      o.timeout_s = std::atoi(value());
    else if (arg == "-h" || arg == "--help") {
      std::printf(
          "usage: cpp-trainer [--gpus N] [--lanes N] [--steps N] [--hidden N] [--classes N] [--cells S] [--lr X]\n"
          "                   [--momentum X] [--report N] [--timeout SECONDS] URL...\n"
          "URLs are brace-expanded; as many as lanes: one connection each, else one shared round-robin.\n"
          "Lanes (default: one a GPU) take the GPUs in turn.\n"
          "Labels are taken modulo --classes.\n");
      std::exit(0);
    } else {
      o.urls.push_back(arg);
    }
  }
  if (o.urls.empty()) throw ArgumentError("no URL to train from (try --help)");
  if (o.lanes == 0) o.lanes = o.gpus;
  if (o.gpus < 1 || o.lanes < 1 || o.steps < 1 || o.hidden < 1 || o.classes < 2 || o.cells < 1 || o.report < 1) {
    throw ArgumentError("--gpus, --lanes, --steps, --hidden, --cells, --report must be positive, --classes at least 2");
  }
  return o;
}

// The GPU of lane `lane`.
int lane_device(const Options& o, int lane) { return lane % o.gpus; }

// The feeder of o.lanes lanes: one connection per lane when there are as
// many URLs, else one shared round-robin; float32 NCHW with ImageNet's
// normalisation.
GpuFeeder make_feeder(const Options& o) {
  if (!gpu_feeding_available()) (void)gpu_device_count();  // throws UnavailableError with the reason
  if (o.gpus > gpu_device_count()) throw ArgumentError("--gpus " + std::to_string(o.gpus) + ": not that many GPUs");
  GpuFeederOptions feed;
  feed.devices.clear();
  for (int lane = 0; lane < o.lanes; ++lane) feed.devices.push_back(lane_device(o, lane));
  feed.convert = ImageConversion{};  // float32 BCHW (NCHW), ImageNet mean and std
  ConnectionOptions connection;
  connection.timeout = std::chrono::seconds(o.timeout_s);
  return GpuFeeder::from_urls(o.urls, connection, feed);
}

// Data-parallel training: one thread per GPU, stepping together. After
// each step's gradients, GPU 0's thread sums them and reports.
class Training {
 public:
  Training(const Options& o, GpuFeeder& feeder, std::vector<std::unique_ptr<Replica>>& replicas)
      : o_(o),
        feeder_(feeder),
        replicas_(replicas),
        losses_(o.lanes, 0.0f),
        images_(o.lanes, 0),
        sequences_(o.lanes),
        sync_(o.lanes) {}

  // Runs every lane to o.steps; rethrows the first lane's failure.
  void run() {
    start_ = last_report_ = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int g = 0; g < o_.lanes; ++g) threads.emplace_back([this, g] { lane(g); });
    for (auto& t : threads) t.join();
    if (error_) std::rethrow_exception(error_);
  }

  [[nodiscard]] std::uint64_t images() const {
    std::uint64_t seen = 0;
    for (auto n : images_) seen += n;
    return seen;
  }
  // Each lane's batch numbers, in the order the lane got them.
  [[nodiscard]] const std::vector<std::vector<std::uint64_t>>& sequences() const { return sequences_; }
  [[nodiscard]] double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  void lane(int g) {
    try {
      for (int step = 0; step < o_.steps; ++step) {
        auto batch = feeder_.next(static_cast<std::size_t>(g));
        if (!batch) throw TimeoutError("the data ended at step " + std::to_string(step));
        losses_[g] = replicas_[g]->step(*batch);
        images_[g] += static_cast<std::uint64_t>((*batch)[0].dim(0));
        sequences_[g].push_back(batch->sequence());
        batch.reset();  // the buffer goes back to the feeder after this GPU's queued work
        sync_.arrive_and_wait();
        if (stop_) return;
        if (g == 0) reduce_and_report(step);
        sync_.arrive_and_wait();
        if (stop_) return;
        replicas_[g]->update(o_.lanes);
      }
    } catch (...) {
      {
        std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
      stop_ = true;
      sync_.arrive_and_drop();
    }
  }

  // GPU 0's thread, between the two barriers of a step.
  void reduce_and_report(int step) {
    if (o_.lanes > 1) all_reduce(replicas_);
    for (float l : losses_) loss_sum_ += l;
    loss_count_ += o_.lanes;
    if ((step + 1) % o_.report != 0 && step + 1 != o_.steps) return;
    const auto now = std::chrono::steady_clock::now();
    const std::uint64_t seen = images();
    const double rate =
        static_cast<double>(seen - images_at_report_) / std::chrono::duration<double>(now - last_report_).count();
    std::printf("step %5d  loss %.4f  %8.1f images/s\n", step + 1, loss_sum_ / loss_count_, rate);
    std::fflush(stdout);
    loss_sum_ = 0;
    loss_count_ = 0;
    last_report_ = now;
    images_at_report_ = seen;
  }

  const Options& o_;
  GpuFeeder& feeder_;
  std::vector<std::unique_ptr<Replica>>& replicas_;
  std::vector<float> losses_;                          // each lane's last loss
  std::vector<std::uint64_t> images_;                  // each lane's images so far
  std::vector<std::vector<std::uint64_t>> sequences_;  // each lane's batch numbers so far
  std::barrier<> sync_;
  std::atomic<bool> stop_ = false;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  double loss_sum_ = 0;  // since the last report (GPU 0's thread)
  int loss_count_ = 0;
  std::chrono::steady_clock::time_point start_, last_report_;
  std::uint64_t images_at_report_ = 0;
};

// True when each lane reads a source of its own (GpuFeeder::from_urls).
bool per_lane_sources(const Options& o) { return brace_expand_all(o.urls).size() == static_cast<std::size_t>(o.lanes); }

// Checks and says that every batch of the source(s), up to the last one
// trained on, reached exactly one lane once: with one source per lane, lane
// i got its source's batches 0, 1, 2, ...; with one source round-robin,
// lane i got batches i, i + lanes, ..., and the lanes together 0..n-1.
bool each_batch_once(const std::vector<std::vector<std::uint64_t>>& sequences, bool per_lane) {
  const std::size_t lanes = sequences.size();
  std::uint64_t total = 0;
  std::uint64_t misplaced = 0;
  for (std::size_t lane = 0; lane < lanes; ++lane) {
    const auto& got = sequences[lane];
    total += got.size();
    for (std::size_t k = 0; k < got.size(); ++k) {
      const std::uint64_t expected = per_lane ? k : lane + k * lanes;
      if (got[k] != expected) ++misplaced;
    }
    std::printf("cpp-trainer: lane %zu took %zu batches\n", lane, got.size());
  }
  std::printf("cpp-trainer: %llu batches over %zu lane(s) (%s): %s\n", static_cast<unsigned long long>(total), lanes,
              per_lane ? "a source each" : "one source, round-robin",
              misplaced == 0 ? "each batch exactly once, in order" : "BATCHES LOST, REPEATED OR OUT OF ORDER");
  if (misplaced != 0)
    std::printf("cpp-trainer: %llu batches out of place\n", static_cast<unsigned long long>(misplaced));
  return misplaced == 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    GpuFeeder feeder = make_feeder(o);
    const int features = 3 * o.cells * o.cells;
    const std::vector<float> initial = initial_parameters(o, features);
    std::vector<std::unique_ptr<Replica>> replicas;
    for (int lane = 0; lane < o.lanes; ++lane) {
      replicas.push_back(std::make_unique<Replica>(lane_device(o, lane), o, features, initial));
    }
    std::printf("cpp-trainer: %d lane(s) on %d GPU(s), MLP %d -> %d -> %d (%zu parameters), from %s\n", o.lanes, o.gpus,
                features, o.hidden, o.classes, initial.size(), o.urls.front().c_str());
    Training training(o, feeder, replicas);
    training.run();
    const std::uint64_t seen = training.images();
    const double seconds = training.seconds();
    std::printf("cpp-trainer: %llu images in %.1f s, %.1f images/s\n", static_cast<unsigned long long>(seen), seconds,
                seen / seconds);
    return each_batch_once(training.sequences(), per_lane_sources(o)) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpp-trainer: %s\n", e.what());
    return 1;
  }
}
