// GpuFeeder and the image conversion kernel, on a real GPU. Has its own
// main(): in a build without CUDA it checks that the API says so; with CUDA
// but no usable GPU it checks the UnavailableError and exits 77 (skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "tensorcom/gpu/gpu_feeder.h"
#include "tensorcom/codec/half.h"
#include "test_support.h"

#if TENSORCOM_TEST_CUDA
#include <cuda_runtime.h>
#endif

using namespace tensorcom;
using namespace std::chrono_literals;

namespace {

// A source of `count` batches made by `make`, then the end.
class VectorSource final : public BatchSource {
 public:
  explicit VectorSource(std::vector<TensorList> batches) : batches_(std::move(batches)) {}
  std::optional<TensorList> next(Milliseconds) override { return batches_.at(next_++); }
  bool ended() const override { return next_ >= batches_.size(); }

 private:
  std::vector<TensorList> batches_;
  std::size_t next_ = 0;
};

class FailingSource final : public BatchSource {
 public:
  std::optional<TensorList> next(Milliseconds) override { throw FormatError("broken input", 12); }
  bool ended() const override { return false; }
};

TensorList make_batch(std::int32_t id, std::int64_t b = 4, std::int64_t h = 6, std::int64_t w = 5) {
  Tensor images = Tensor::allocate(DType::kUInt8, {b, h, w, 3}, "images");
  for (std::size_t i = 0; i < images.nbytes(); ++i) images.data()[i] = static_cast<std::byte>((id * 7 + i * 13) & 0xff);
  Tensor labels = Tensor::allocate(DType::kInt32, {b});
  for (std::int64_t i = 0; i < b; ++i) labels.values<std::int32_t>()[i] = id * 100 + static_cast<std::int32_t>(i);
  return {images, labels};
}

std::vector<std::unique_ptr<BatchSource>> sources_of(std::vector<TensorList> batches) {
  std::vector<std::unique_ptr<BatchSource>> sources;
  sources.push_back(std::make_unique<VectorSource>(std::move(batches)));
  return sources;
}

}  // namespace

#if TENSORCOM_TEST_CUDA

namespace {

std::vector<std::byte> to_host(const DeviceTensor& t) {
  std::vector<std::byte> out(t.nbytes());
  if (cudaMemcpy(out.data(), t.data(), t.nbytes(), cudaMemcpyDeviceToHost) != cudaSuccess) {
    throw std::runtime_error("cudaMemcpy to host failed");
  }
  return out;
}

std::int32_t id_of(const DeviceBatch& batch) {
  batch.synchronize();
  auto labels = to_host(batch[1]);
  std::int32_t first = 0;
  std::memcpy(&first, labels.data(), sizeof first);
  return first / 100;
}

void check_same(const DeviceBatch& got, const TensorList& want) {
  got.synchronize();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i].dtype() == device_dtype(want[i].dtype()));
    CHECK(got[i].shape() == want[i].shape());
    CHECK(got[i].info() == want[i].info());
    auto bytes = to_host(got[i]);
    CHECK(std::memcmp(bytes.data(), want[i].data(), want[i].nbytes()) == 0);
  }
}

// The CPU reference: float, then rounded to nearest even in the target type.
float round_to(DeviceDType dtype, float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (dtype == DeviceDType::kBFloat16) {
    bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
    std::memcpy(&x, &bits, 4);
    return x;
  }
  if (dtype == DeviceDType::kFloat16) return half_to_float(float_to_half(x));
  return x;
}

float stored_to_float(DeviceDType dtype, const std::byte* p) {
  if (dtype == DeviceDType::kFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  if (dtype == DeviceDType::kFloat16) return half_to_float(h);
  const std::uint32_t bits = std::uint32_t{h} << 16;  // bfloat16: the top half of a float
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void check_conversion(const Tensor& images, const DeviceTensor& out, const ImageConversion& conversion) {
  const auto& s = images.shape();
  const std::int64_t B = s[0], H = s[1], W = s[2], C = s[3];
  auto bytes = to_host(out);
  const std::size_t item = itemsize(conversion.dtype);
  const auto* px = reinterpret_cast<const std::uint8_t*>(images.data());
  std::size_t mismatches = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t y = 0; y < H; ++y)
      for (std::int64_t x = 0; x < W; ++x)
        for (std::int64_t c = 0; c < C; ++c) {
          const float mean = conversion.mean.size() == 1 ? conversion.mean[0] : conversion.mean[c];
          const float sd = conversion.std.size() == 1 ? conversion.std[0] : conversion.std[c];
          const float want = round_to(conversion.dtype, (px[((b * H + y) * W + x) * C + c] / 255.0f - mean) / sd);
          const std::int64_t index =
              conversion.layout == ImageLayout::kBCHW ? ((b * C + c) * H + y) * W + x : ((b * H + y) * W + x) * C + c;
          const float got = stored_to_float(conversion.dtype, bytes.data() + index * item);
          // The kernel computes x * scale + bias (one fma), the reference
          // (x / 255 - mean) / std: where they straddle a rounding boundary of
          // the target type they differ by one unit in its last place.
          const float ulp = conversion.dtype == DeviceDType::kFloat32   ? 1e-6f
                            : conversion.dtype == DeviceDType::kFloat16 ? 2e-3f
                                                                        : 1.6e-2f;
          if (std::fabs(got - want) > ulp * std::max(1.0f, std::fabs(want))) ++mismatches;
        }
  CHECK(mismatches == 0);
}

struct DeviceMemory {
  void* p = nullptr;
  explicit DeviceMemory(std::size_t n) { REQUIRE(cudaMalloc(&p, n) == cudaSuccess); }
  ~DeviceMemory() { cudaFree(p); }
};

}  // namespace

TEST_CASE("gpu_feeding_available") {
  CHECK(gpu_feeding_available());
  CHECK(gpu_device_count() >= 1);
}

TEST_CASE("image conversion kernel matches the CPU reference") {
  std::mt19937 rng(1);
  Tensor images = Tensor::allocate(DType::kUInt8, {3, 5, 7, 3});
  for (std::byte& b : images.bytes()) b = static_cast<std::byte>(rng() & 0xff);
  DeviceMemory in(images.nbytes());
  REQUIRE(cudaMemcpy(in.p, images.data(), images.nbytes(), cudaMemcpyHostToDevice) == cudaSuccess);
  DeviceTensor device_images(DeviceDType::kUInt8, images.shape(), 0, in.p, nullptr);
  for (DeviceDType dtype : {DeviceDType::kFloat32, DeviceDType::kFloat16, DeviceDType::kBFloat16}) {
    for (ImageLayout layout : {ImageLayout::kBCHW, ImageLayout::kBHWC}) {
      const std::string label = std::string(dtype_name(dtype)) + " " + std::string(layout_name(layout));
      INFO(label);
      ImageConversion conversion;
      conversion.dtype = dtype;
      conversion.layout = layout;
      DeviceMemory out(images.numel() * itemsize(dtype));
      DeviceTensor device_out(dtype, converted_shape(images.shape(), layout), 0, out.p, nullptr);
      convert_images(device_images, device_out, conversion, nullptr);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      check_conversion(images, device_out, conversion);
    }
  }
  SUBCASE("one mean and std for all channels, 1 channel") {
    Tensor gray = Tensor::allocate(DType::kUInt8, {2, 4, 4, 1});
    for (std::byte& b : gray.bytes()) b = static_cast<std::byte>(rng() & 0xff);
    DeviceMemory gin(gray.nbytes()), gout(gray.numel() * 4);
    REQUIRE(cudaMemcpy(gin.p, gray.data(), gray.nbytes(), cudaMemcpyHostToDevice) == cudaSuccess);
    ImageConversion conversion;
    conversion.mean = {0.5f};
    conversion.std = {0.25f};
    DeviceTensor a(DeviceDType::kUInt8, gray.shape(), 0, gin.p, nullptr);
    DeviceTensor b(DeviceDType::kFloat32, {2, 1, 4, 4}, 0, gout.p, nullptr);
    convert_images(a, b, conversion, nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    check_conversion(gray, b, conversion);
  }
  SUBCASE("mismatched output or bad conversion: ArgumentError") {
    ImageConversion conversion;
    DeviceMemory out(images.numel() * 4);
    DeviceTensor wrong(DeviceDType::kFloat32, images.shape(), 0, out.p, nullptr);  // BHWC shape for BCHW
    CHECK_THROWS_AS(convert_images(device_images, wrong, conversion, nullptr), ArgumentError);
    conversion.std = {1.0f, 0.0f, 1.0f};
    DeviceTensor right(DeviceDType::kFloat32, converted_shape(images.shape(), ImageLayout::kBCHW), 0, out.p, nullptr);
    CHECK_THROWS_AS(convert_images(device_images, right, conversion, nullptr), ArgumentError);
  }
}

TEST_CASE("one source, one GPU: every batch once, in order, intact") {
  std::vector<TensorList> batches;
  for (int i = 0; i < 12; ++i) batches.push_back(make_batch(i, 4 + i % 3));  // sizes change: buffers grow
  GpuFeederOptions options;
  options.prefetch = 2;
  options.chunk_bytes = 64;  // many chunks a batch
  GpuFeeder feeder(sources_of(batches), options);
  for (int i = 0; i < 12; ++i) {
    auto batch = feeder.next(0, 10s);
    REQUIRE(batch.has_value());
    CHECK(batch->sequence() == static_cast<std::uint64_t>(i));
    CHECK(batch->device() == 0);
    check_same(*batch, batches[i]);
  }
  CHECK_FALSE(feeder.next(0, 1s).has_value());
  CHECK(feeder.finished(0));
  CHECK(feeder.stats().batches == 12);
}

TEST_CASE("conversion in the feeder") {
  std::vector<TensorList> batches{make_batch(1, 2, 9, 11), make_batch(2, 2, 9, 11)};
  GpuFeederOptions options;
  options.convert = ImageConversion{};
  options.convert->dtype = DeviceDType::kFloat16;
  GpuFeeder feeder(sources_of(batches), options);
  for (const TensorList& want : batches) {
    auto batch = feeder.next(0, 10s);
    REQUIRE(batch.has_value());
    batch->synchronize();
    CHECK((*batch)[0].dtype() == DeviceDType::kFloat16);
    CHECK((*batch)[0].shape() == Shape{2, 3, 9, 11});
    check_conversion(want[0], (*batch)[0], *options.convert);
    CHECK(to_host((*batch)[1]) == tensorcom::testing::to_bytes(want[1].bytes()));
  }
}

TEST_CASE("the pool bounds what is in flight; released batches come back") {
  std::vector<TensorList> batches;
  for (int i = 0; i < 6; ++i) batches.push_back(make_batch(i));
  GpuFeederOptions options;
  options.prefetch = 1;  // two device buffers
  GpuFeeder feeder(sources_of(batches), options);
  auto a = feeder.next(0, 10s);
  auto b = feeder.next(0, 10s);
  REQUIRE((a && b));
  CHECK_FALSE(feeder.next(0, 300ms).has_value());  // both buffers held
  DeviceTensor kept = (*b)[0];                     // a tensor alone holds its batch too
  a.reset();
  auto c = feeder.next(0, 10s);
  REQUIRE(c.has_value());
  CHECK(c->sequence() == 2);
  b.reset();
  CHECK_FALSE(feeder.next(0, 300ms).has_value());
  kept = DeviceTensor();
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  c->wait(stream);  // released after the stream's work
  c.reset();
  for (int i = 3; i < 6; ++i) {
    auto d = feeder.next(0, 10s);
    REQUIRE(d.has_value());
    CHECK(d->sequence() == static_cast<std::uint64_t>(i));
    check_same(*d, batches[i]);
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("round-robin over lanes: whole batches, none lost or repeated") {
  const int devices = gpu_device_count();
  const int lanes = 3;
  std::vector<TensorList> batches;
  for (int i = 0; i < 30; ++i) batches.push_back(make_batch(i));
  GpuFeederOptions options;
  options.devices.clear();
  for (int i = 0; i < lanes; ++i) options.devices.push_back(i % devices);  // one GPU may serve several lanes
  GpuFeeder feeder(sources_of(batches), options);
  std::vector<std::vector<std::int32_t>> seen(lanes);
  std::vector<std::thread> trainers;
  for (int lane = 0; lane < lanes; ++lane) {
    trainers.emplace_back([&, lane] {
      cudaSetDevice(options.devices[lane]);
      while (auto batch = feeder.next(lane, 10s)) {
        if (batch->device() != options.devices[lane]) seen[lane].push_back(-1);
        seen[lane].push_back(id_of(*batch));
      }
    });
  }
  for (auto& t : trainers) t.join();
  std::multiset<std::int32_t> all;
  for (int lane = 0; lane < lanes; ++lane) {
    for (std::size_t k = 0; k < seen[lane].size(); ++k) CHECK(seen[lane][k] == static_cast<int>(lane + k * lanes));
    all.insert(seen[lane].begin(), seen[lane].end());
  }
  CHECK(all.size() == 30);
  CHECK(std::set<std::int32_t>(all.begin(), all.end()).size() == 30);
}

TEST_CASE("one Connection per lane, from a brace-expanded URL list") {
  tensorcom::testing::TempDir dir;
  const std::string base = (dir.path / "feed").string();
  ConnectionOptions receive;
  receive.total = 5;
  receive.timeout = 10s;
  GpuFeederOptions options;
  options.devices = {0, 0};
  std::vector<std::string> urls{"zpull+ipc://" + base + "{0,1}"};
  GpuFeeder feeder = GpuFeeder::from_urls(urls, receive, options);
  Connection push0({"zpush+ipc://" + base + "0"}), push1({"zpush+ipc://" + base + "1"});
  for (int i = 0; i < 5; ++i) {
    push0.send(make_batch(i));
    push1.send(make_batch(100 + i));
  }
  for (int lane = 0; lane < 2; ++lane) {
    for (int i = 0; i < 5; ++i) {
      auto batch = feeder.next(lane, 10s);
      REQUIRE(batch.has_value());
      CHECK(id_of(*batch) == lane * 100 + i);
    }
    CHECK_FALSE(feeder.next(lane, 2s).has_value());
    CHECK(feeder.finished(lane));
  }
}

TEST_CASE("errors") {
  SUBCASE("a failing source: next() rethrows its error") {
    std::vector<std::unique_ptr<BatchSource>> sources;
    sources.push_back(std::make_unique<FailingSource>());
    GpuFeeder feeder(std::move(sources));
    CHECK_THROWS_AS((void)feeder.next(0, 10s), FormatError);
    CHECK_THROWS_AS((void)feeder.next(0, 10s), FormatError);
  }
  SUBCASE("bad options") {
    GpuFeederOptions options;
    options.devices = {gpu_device_count()};
    CHECK_THROWS_AS(GpuFeeder(sources_of({}), options), ArgumentError);
    options.devices = {0};
    options.pinned_buffers = 0;
    CHECK_THROWS_AS(GpuFeeder(sources_of({}), options), ArgumentError);
  }
  SUBCASE("a conversion that does not fit the batch") {
    GpuFeederOptions options;
    options.convert = ImageConversion{};
    options.convert->tensor = 1;  // int32 labels
    GpuFeeder feeder(sources_of({make_batch(0)}), options);
    CHECK_THROWS_AS((void)feeder.next(0, 10s), ArgumentError);
  }
}

// Without a usable GPU: the error names CUDA's reason. Returns false if not so.
bool unavailable_is_reported() {
  if (gpu_feeding_available()) return false;
  try {
    GpuFeeder feeder(sources_of({}));
  } catch (const UnavailableError& e) {
    std::printf("gpu_feeder: %s\n", e.what());
    return std::string(e.what()).find("not available") != std::string::npos;
  }
  return false;
}

int main(int argc, char** argv) {
  constexpr int kSkipped = 77;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("gpu_feeder: no GPU (%s): skipped\n", status != cudaSuccess ? cudaGetErrorName(status) : "0 devices");
    return unavailable_is_reported() ? kSkipped : 1;
  }
  doctest::Context context(argc, argv);
  return context.run();
}

#else  // built without CUDA

TEST_CASE("without CUDA, GPU feeding says it is not available") {
  CHECK_FALSE(gpu_feeding_available());
  CHECK_THROWS_WITH_AS((void)gpu_device_count(), "GPU feeding is not available: tensorcom was built without CUDA",
                       UnavailableError);
  CHECK_THROWS_WITH_AS(GpuFeeder(sources_of({make_batch(0)})),
                       "GPU feeding is not available: tensorcom was built without CUDA", UnavailableError);
  std::vector<std::string> urls{"zpull+ipc:///nonexistent/x"};
  CHECK_THROWS_AS((void)GpuFeeder::from_urls(urls, {}, {}), UnavailableError);
  // The host-side parts still work.
  CHECK(converted_shape({2, 5, 7, 3}, ImageLayout::kBCHW) == Shape{2, 3, 5, 7});
  CHECK(itemsize(DeviceDType::kBFloat16) == 2);
  CHECK(dtype_name(DeviceDType::kBFloat16) == "bfloat16");
  DeviceBatch empty;
  CHECK(empty.empty());
}

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  return context.run();
}

#endif
