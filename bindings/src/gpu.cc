// The GPU feeder for Python: tensorcom._GpuFeeder, the path of
// tensorcom.Connection's torch_cuda converter, and DeviceTensor, what it
// hands out. The feeder's thread reads the very C++ connection that a
// _Connection wraps (SharedConnection), so the Python Connection keeps its
// statistics, timeout, metrics and close(); each batch arrives as
// DeviceTensors that torch (or any DLPack consumer) takes without a copy.
// This file uses only the tensorcom API, which hides CUDA: it builds with and
// without CUDA, and without it constructing a feeder raises UnavailableError.
#include <pybind11/stl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "dlpack.h"
#include "tensorcom/gpu/gpu_feeder.h"

namespace tensorcom::python {

namespace {

// How often a wait for a batch looks up to let Python handle signals (Ctrl-C).
constexpr Milliseconds kSignalCheck{100};

using Clock = std::chrono::steady_clock;

DeviceDType signed_dtype(DeviceDType dtype) {
  switch (dtype) {
    case DeviceDType::kUInt8: return DeviceDType::kInt8;
    case DeviceDType::kUInt16: return DeviceDType::kInt16;
    case DeviceDType::kUInt32: return DeviceDType::kInt32;
    case DeviceDType::kUInt64: return DeviceDType::kInt64;
    default: return dtype;
  }
}

// Where a DeviceTensor's memory is: on a GPU (every tensor a feeder hands
// out), or host memory wrapped for tests on machines without a GPU.
enum class Memory : std::uint8_t { kGpu, kHostForTests };

// One tensor of a DeviceBatch for Python, with the batch (whose events
// order the consumer's reads after the copy, and the buffer's reuse after
// them) and, for tensors the feeder was asked to keep on the host, a host copy.
class PyDeviceTensor {
 public:
  PyDeviceTensor(const DeviceBatch& batch, std::size_t index, GpuStream producer, std::optional<Tensor> host,
                 bool converted)
      : batch_(batch),
        tensor_(batch[index]),
        producer_(producer),
        host_(std::move(host)),
        converted_(converted),
        memory_(Memory::kGpu) {}

  // Host memory as a DeviceTensor whose DLPack device is the CPU.
  explicit PyDeviceTensor(DeviceTensor host_tensor) : tensor_(std::move(host_tensor)), memory_(Memory::kHostForTests) {}

  [[nodiscard]] const DeviceTensor& tensor() const noexcept { return tensor_; }
  [[nodiscard]] bool converted() const noexcept { return converted_; }

  [[nodiscard]] py::object host() const {
    if (!host_) return py::none();
    return to_array(*host_, false);
  }

  [[nodiscard]] DLDevice dlpack_device() const {
    if (memory_ == Memory::kHostForTests) return {kDLCPU, 0};
    return {kDLCUDA, tensor_.device()};
  }

  // The DLPack export: `stream` (see consumer_stream) waits on the GPU for the
  // batch's copy and is recorded as a reader of the batch, so its buffer goes
  // back to the pool only after the work queued on that stream before the
  // last copy of the batch (the consumer's tensor included) is gone.
  // Raises BufferError for a copy or another device, which it cannot give.
  [[nodiscard]] py::object dlpack(const py::object& stream, const py::object& dl_device, const py::object& copy) const {
    const DLDevice device = dlpack_device();
    if (!copy.is_none() && copy.cast<bool>()) throw py::buffer_error("DeviceTensor.__dlpack__ cannot copy");
    if (!dl_device.is_none() && !dl_device.equal(py::make_tuple(device.device_type, device.device_id))) {
      throw py::buffer_error("DeviceTensor.__dlpack__: the tensor is on " +
                             std::string(py::repr(py::make_tuple(device.device_type, device.device_id))) + ", not " +
                             std::string(py::repr(dl_device)));
    }
    if (memory_ == Memory::kGpu) {
      if (const std::optional<GpuStream> s = consumer_stream(stream)) batch_.wait(*s);
    }
    return dlpack_capsule(tensor_, device);
  }

  // __cuda_array_interface__ (version 3). Its "stream" is the feeder's copy
  // stream: a consumer synchronizes with it before reading (that stream
  // carries the batch's copy). The interface cannot say who reads: the
  // buffer's reuse is ordered after the legacy default stream (and the
  // streams given to __dlpack__ or record_stream); a reader on another stream
  // must call record_stream(stream) or keep this object until its work is done.
  [[nodiscard]] py::dict cuda_array_interface() const {
    if (memory_ != Memory::kGpu) throw py::attribute_error("a host tensor has no __cuda_array_interface__");
    py::dict out;
    out["shape"] = py::tuple(py::cast(tensor_.shape()));
    out["typestr"] = typestr(tensor_.dtype());
    out["data"] = py::make_tuple(tensor_.address(), false);
    out["strides"] = py::none();
    out["version"] = 3;
    out["stream"] = py::int_(reinterpret_cast<std::uintptr_t>(producer_));
    return out;
  }

  void record_stream(const py::object& stream) const {
    if (memory_ != Memory::kGpu) return;
    if (const std::optional<GpuStream> s = consumer_stream(stream)) batch_.record_stream(*s);
  }

  // The same memory as the signed integer dtype of the same width, for
  // consumers without unsigned 16, 32 or 64-bit dtypes (torch before 2.3).
  [[nodiscard]] PyDeviceTensor signed_view() const {
    PyDeviceTensor out = *this;
    out.tensor_ = DeviceTensor(signed_dtype(tensor_.dtype()), tensor_.shape(), tensor_.device(), tensor_.data(),
                               tensor_.owner(), tensor_.info());
    return out;
  }

  [[nodiscard]] std::string repr() const {
    const std::string where =
        memory_ == Memory::kGpu ? "cuda:" + std::to_string(tensor_.device()) : std::string("the CPU (a test)");
    return "<tensorcom.DeviceTensor " + std::string(dtype_name(tensor_.dtype())) + " " + format_shape(tensor_.shape()) +
           " on " + where + ">";
  }

  void wait(const py::object& stream) const {
    if (memory_ != Memory::kGpu) return;
    if (const std::optional<GpuStream> s = consumer_stream(stream)) batch_.wait(*s);
  }

 private:
  DeviceBatch batch_;  // empty for host memory
  DeviceTensor tensor_;
  GpuStream producer_ = nullptr;
  std::optional<Tensor> host_;
  bool converted_ = false;
  Memory memory_;
};

// Host copies of the tensors that Python reads on the host (the resume
// metadata), by batch sequence: made by the feeder's thread as it receives,
// taken with the batch. Copies, not views: a view would hold the whole
// received message in memory as long as the batch.
class HostCopies {
 public:
  explicit HostCopies(std::vector<std::string> infos) : infos_(std::move(infos)) {}

  void keep(std::uint64_t sequence, const TensorList& batch) {
    std::vector<std::optional<Tensor>> copies(batch.size());
    bool any = false;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!wanted(batch[i].info())) continue;
      copies[i] = copy_of(batch[i]);
      any = true;
    }
    if (!any) return;
    std::lock_guard lock(mutex_);
    copies_[sequence] = std::move(copies);
  }

  // The copies of batch `sequence`, one (or none) per tensor of its `size`.
  [[nodiscard]] std::vector<std::optional<Tensor>> take(std::uint64_t sequence, std::size_t size) {
    std::vector<std::optional<Tensor>> out;
    {
      std::lock_guard lock(mutex_);
      auto found = copies_.find(sequence);
      if (found != copies_.end()) {
        out = std::move(found->second);
        copies_.erase(found);
      }
    }
    out.resize(size);
    return out;
  }

 private:
  [[nodiscard]] bool wanted(std::string_view info) const {
    return std::find(infos_.begin(), infos_.end(), info) != infos_.end();
  }

  static Tensor copy_of(const Tensor& tensor) {
    Tensor copy = Tensor::allocate(tensor.dtype(), tensor.shape(), tensor.info());
    if (tensor.nbytes() != 0) std::memcpy(copy.data(), tensor.data(), tensor.nbytes());
    return copy;
  }

  const std::vector<std::string> infos_;
  std::mutex mutex_;
  std::map<std::uint64_t, std::vector<std::optional<Tensor>>> copies_;
};

// The feeder thread's source: the _Connection's C++ connection, read under
// its lock. It numbers batches as the feeder does (each batch it returns is
// fed, in order), which is how their host copies find them.
class SharedConnectionSource final : public BatchSource {
 public:
  SharedConnectionSource(SharedConnection& connection, std::shared_ptr<HostCopies> copies)
      : connection_(connection), copies_(std::move(copies)) {}

  std::optional<TensorList> next(Milliseconds wait) override {
    std::optional<TensorList> batch;
    try {
      batch = connection_.receive(wait);
    } catch (const TransportError& e) {
      // A signal for Python's main thread may interrupt this thread's wait.
      if (e.code() == EINTR) return std::nullopt;
      throw;
    }
    if (batch) copies_->keep(sequence_++, *batch);
    return batch;
  }

  // The Python Connection counts batches and times out itself; the feeder
  // reads until it is closed.
  bool ended() const override { return false; }

 private:
  SharedConnection& connection_;
  std::shared_ptr<HostCopies> copies_;
  std::uint64_t sequence_ = 0;
};

DeviceDType conversion_dtype(const std::string& name) {
  if (name == "float32") return DeviceDType::kFloat32;
  if (name == "float16") return DeviceDType::kFloat16;
  if (name == "bfloat16") return DeviceDType::kBFloat16;
  throw ArgumentError("image conversion dtype " + name + ": float32, float16 or bfloat16");
}

// A GpuFeeder of one device reading a _Connection, for tensorcom.Connection.
class PyGpuFeeder {
 public:
  // Throws UnavailableError without CUDA or a GPU (GpuFeeder's errors).
  PyGpuFeeder(py::object connection, GpuFeederOptions options, std::vector<std::string> host_infos)
      : connection_(std::move(connection)),
        shared_(&shared_connection(connection_)),
        copies_(std::make_shared<HostCopies>(std::move(host_infos))) {
    std::vector<std::unique_ptr<BatchSource>> sources;
    sources.push_back(std::make_unique<SharedConnectionSource>(*shared_, copies_));
    feeder_.emplace(std::move(sources), std::move(options));
  }

  // The next batch as ([DeviceTensor], [info]), or None if none came within
  // `timeout` (none: wait forever). Waits without the GIL, looking up now and
  // then for signals, so that Ctrl-C interrupts it.
  [[nodiscard]] py::object recv(std::optional<Milliseconds> timeout) {
    const auto start = Clock::now();
    for (;;) {
      const auto waited = std::chrono::duration_cast<Milliseconds>(Clock::now() - start);
      Milliseconds slice = kSignalCheck;
      if (timeout) slice = std::clamp(*timeout - waited, Milliseconds(0), kSignalCheck);
      std::optional<DeviceBatch> batch = without_gil([&] { return get().next(0, slice); });
      if (batch) return deliver(*batch);
      if (timeout && Clock::now() - start >= *timeout) return py::none();
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }

  // The next batch; the connection's TimeoutError after its timeout.
  [[nodiscard]] py::object next() {
    py::object got = recv(shared_->timeout());
    if (got.is_none()) throw shared_->silence_error();
    return got;
  }

  // Stops the feeder's thread; batches handed out stay valid.
  void close() {
    without_gil([&] { feeder_.reset(); });
  }

  [[nodiscard]] bool closed() const noexcept { return !feeder_; }
  [[nodiscard]] GpuFeeder& get() {
    if (!feeder_) throw ArgumentError("the GPU feeder is closed");
    return *feeder_;
  }

 private:
  [[nodiscard]] py::tuple deliver(const DeviceBatch& batch) {
    std::vector<std::optional<Tensor>> host = copies_->take(batch.sequence(), batch.size());
    const GpuStream producer = get().stream(0);
    const std::optional<ImageConversion>& convert = get().options().convert;
    py::list tensors;
    py::list infos;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const bool converted = convert && convert->tensor == i;
      tensors.append(py::cast(PyDeviceTensor(batch, i, producer, std::move(host[i]), converted)));
      infos.append(py::str(std::string(batch[i].info())));
    }
    return py::make_tuple(tensors, infos);
  }

  py::object connection_;  // keeps the connection the feeder reads alive
  SharedConnection* shared_;
  std::shared_ptr<HostCopies> copies_;
  std::optional<GpuFeeder> feeder_;  // declared last: its thread stops before what it reads goes
};

std::unique_ptr<PyGpuFeeder> make_feeder(py::object connection, int device, std::size_t prefetch,
                                         std::size_t pinned_buffers, std::optional<std::size_t> convert_tensor,
                                         const std::string& convert_dtype, bool channels_last,
                                         std::optional<std::vector<float>> mean,
                                         std::optional<std::vector<float>> stddev,
                                         std::vector<std::string> host_infos) {
  GpuFeederOptions options;
  options.devices = {device};
  options.prefetch = prefetch;
  options.pinned_buffers = pinned_buffers;
  if (convert_tensor) {
    ImageConversion conversion;
    conversion.tensor = *convert_tensor;
    conversion.dtype = conversion_dtype(convert_dtype);
    conversion.layout = channels_last ? ImageLayout::kBHWC : ImageLayout::kBCHW;
    if (mean) conversion.mean = std::move(*mean);
    if (stddev) conversion.std = std::move(*stddev);
    options.convert = std::move(conversion);
  }
  return std::make_unique<PyGpuFeeder>(std::move(connection), std::move(options), std::move(host_infos));
}

// For tests on machines without a GPU: a NumPy array as a DeviceTensor on
// the CPU, so that the DLPack export (capsule, deleter, dtypes, shapes) runs
// where no feeder can.
PyDeviceTensor host_tensor_for_tests(py::handle array) {
  const Tensor t = to_tensor(array);
  return PyDeviceTensor(
      DeviceTensor(device_dtype(t.dtype()), t.shape(), 0, const_cast<std::byte*>(t.data()), t.owner(), t.info()));
}

py::dict stats_dict(const GpuFeederStats& s) {
  py::dict d;
  d["batches"] = s.batches;
  d["bytes"] = s.bytes;
  d["receive_seconds"] = s.receive_seconds;
  d["staging_seconds"] = s.staging_seconds;
  d["pool_wait_seconds"] = s.pool_wait_seconds;
  return d;
}

void bind_device_tensor(py::module_& m) {
  py::class_<PyDeviceTensor>(m, "DeviceTensor",
                             "A tensor of a batch on a GPU, from the GPU feeder. torch.from_dlpack(t) (DLPack) or\n"
                             "__cuda_array_interface__ takes it without a copy; its memory goes back to the feeder's\n"
                             "pool when the last reference to the batch is gone, after the work queued by then on the\n"
                             "streams that read it (those given to __dlpack__, wait or record_stream; else the legacy\n"
                             "default stream).")
      .def_property_readonly("shape", [](const PyDeviceTensor& t) { return py::tuple(py::cast(t.tensor().shape())); })
      .def_property_readonly("dtype",
                             [](const PyDeviceTensor& t) { return std::string(dtype_name(t.tensor().dtype())); })
      .def_property_readonly("ndim", [](const PyDeviceTensor& t) { return t.tensor().ndim(); })
      .def_property_readonly("nbytes", [](const PyDeviceTensor& t) { return t.tensor().nbytes(); })
      .def_property_readonly(
          "device", [](const PyDeviceTensor& t) { return t.tensor().device(); }, "the CUDA device ordinal")
      .def_property_readonly("info", [](const PyDeviceTensor& t) { return std::string(t.tensor().info()); })
      .def_property_readonly("data_ptr", [](const PyDeviceTensor& t) { return t.tensor().address(); })
      .def_property_readonly("converted", &PyDeviceTensor::converted,
                             "True for the images the feeder's image conversion produced")
      .def_property_readonly("host", &PyDeviceTensor::host,
                             "a read-only NumPy copy of the received tensor, for those the feeder keeps on the host "
                             "(host_infos: the resume metadata); else None")
      .def(
          "__dlpack__",
          // max_version is accepted and unused: a legacy capsule serves every version.
          [](const PyDeviceTensor& t, const py::object& stream, const py::object&, const py::object& dl_device,
             const py::object& copy) { return t.dlpack(stream, dl_device, copy); },
          py::arg("stream") = py::none(), py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
          py::arg("copy") = py::none(),
          "a legacy \"dltensor\" capsule (what every max_version accepts); stream, by the array API's convention, "
          "waits on the GPU for the data and reads it (None or 1: the legacy default stream, 2: the per-thread "
          "default stream, else a cudaStream_t; -1: no wait)")
      .def("__dlpack_device__",
           [](const PyDeviceTensor& t) {
             const DLDevice d = t.dlpack_device();
             return py::make_tuple(d.device_type, d.device_id);
           })
      .def_property_readonly("__cuda_array_interface__", &PyDeviceTensor::cuda_array_interface)
      .def("wait", &PyDeviceTensor::wait, py::arg("stream") = py::none(),
           "makes stream (as __dlpack__'s) wait on the GPU for the batch, and records it as a reader")
      .def("record_stream", &PyDeviceTensor::record_stream, py::arg("stream"),
           "records stream (as __dlpack__'s) as a reader of the batch, without waiting")
      .def("signed_view", &PyDeviceTensor::signed_view,
           "the same memory as the signed integer dtype of the same width (for torch before 2.3, which has no "
           "uint16, uint32, uint64)")
      .def("__repr__", &PyDeviceTensor::repr);
}

}  // namespace

void bind_gpu(py::module_& m) {
  bind_device_tensor(m);
  m.def("gpu_feeding_available", &gpu_feeding_available,
        "True when this build has CUDA and the process sees a GPU: the torch_cuda converter then feeds through C++");
  m.def("_host_tensor_for_tests", &host_tensor_for_tests, py::arg("array"),
        "tests only: an array's memory as a DeviceTensor on the CPU, to test the DLPack export without a GPU");
  const ImageConversion conversion_defaults;
  py::class_<PyGpuFeeder>(m, "_GpuFeeder",
                          "The C++ GpuFeeder on one device, reading a _Connection on a thread of its own; "
                          "tensorcom.Connection's torch_cuda path.")
      .def(py::init(&make_feeder), py::arg("connection"), py::kw_only(), py::arg("device") = 0,
           py::arg("prefetch") = GpuFeederOptions{}.prefetch,
           py::arg("pinned_buffers") = GpuFeederOptions{}.pinned_buffers, py::arg("convert_tensor") = py::none(),
           py::arg("convert_dtype") = "float32", py::arg("channels_last") = false,
           py::arg("mean") = conversion_defaults.mean, py::arg("std") = conversion_defaults.std,
           py::arg("host_infos") = std::vector<std::string>{"meta"})
      .def(
          "recv", [](PyGpuFeeder& self, std::optional<double> timeout) { return self.recv(to_timeout(timeout)); },
          py::arg("timeout") = py::none(),
          "([DeviceTensor], [info]) of the next batch, or None if none came within timeout seconds")
      .def("next", &PyGpuFeeder::next,
           "([DeviceTensor], [info]) of the next batch; TimeoutError after the connection's timeout")
      .def("close", &PyGpuFeeder::close, "stops the feeder's thread; tensors handed out stay valid")
      .def_property_readonly("closed", &PyGpuFeeder::closed)
      .def_property_readonly("device", [](PyGpuFeeder& self) { return self.get().options().devices.at(0); })
      .def_property_readonly("prefetch", [](PyGpuFeeder& self) { return self.get().options().prefetch; })
      .def_property_readonly(
          "stream", [](PyGpuFeeder& self) { return reinterpret_cast<std::uintptr_t>(self.get().stream(0)); },
          "the cudaStream_t the feeder copies on")
      .def_property_readonly("stats", [](PyGpuFeeder& self) { return stats_dict(self.get().stats()); });
}

}  // namespace tensorcom::python
