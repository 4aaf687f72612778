#include "dlpack.h"

#include <memory>
#include <vector>

namespace tensorcom::python {

namespace {

enum DLDataTypeCode : std::uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 };

struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; given always (NULL means C order only since DLPack 0.6)
  std::uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

static_assert(sizeof(void*) != 8 || (sizeof(DLTensor) == 48 && sizeof(DLManagedTensor) == 64),
              "DLPack's layout on a 64-bit platform");

// The capsule's name until a consumer takes it and renames it "used_dltensor".
constexpr char kCapsuleName[] = "dltensor";

// CUDA's handles of the legacy and the per-thread default stream
// (cudaStreamLegacy, cudaStreamPerThread): the array API's numbers 1 and 2 are
// these by design, and any other number is a cudaStream_t.
const GpuStream kLegacyDefaultStream = reinterpret_cast<GpuStream>(std::uintptr_t{1});

DLDataType dlpack_dtype(DeviceDType dtype) {
  const auto bits = static_cast<std::uint8_t>(itemsize(dtype) * 8);
  switch (dtype) {
    case DeviceDType::kFloat16:
    case DeviceDType::kFloat32:
    case DeviceDType::kFloat64: return {kDLFloat, bits, 1};
    case DeviceDType::kBFloat16: return {kDLBfloat, bits, 1};
    case DeviceDType::kInt8:
    case DeviceDType::kInt16:
    case DeviceDType::kInt32:
    case DeviceDType::kInt64: return {kDLInt, bits, 1};
    case DeviceDType::kUInt8:
    case DeviceDType::kUInt16:
    case DeviceDType::kUInt32:
    case DeviceDType::kUInt64: return {kDLUInt, bits, 1};
  }
  throw ArgumentError("DLPack: unknown device dtype " + std::to_string(static_cast<int>(dtype)));
}

// What a "dltensor" capsule owns: the DLManagedTensor and a copy of the
// DeviceTensor, whose owner keeps the memory out of the feeder's pool until
// the consumer calls the deleter.
struct DlpackExport {
  DLManagedTensor managed{};
  DeviceTensor tensor;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

// May run on any thread, with or without the GIL: it touches no Python object
// (a host tensor's owner is a python_owner, which is made for that).
void delete_export(DLManagedTensor* managed) { delete static_cast<DlpackExport*>(managed->manager_ctx); }

// A consumer that took the tensor renamed the capsule and calls the deleter
// itself; a capsule nobody took still owns it.
void destroy_capsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

}  // namespace

std::string typestr(DeviceDType dtype) {
  const DLDataType dl = dlpack_dtype(dtype);
  if (dl.code == kDLBfloat) {
    throw py::attribute_error("bfloat16 has no __cuda_array_interface__ type string: use DLPack (__dlpack__)");
  }
  const char kind = dl.code == kDLFloat ? 'f' : dl.code == kDLInt ? 'i' : 'u';
  return std::string(dl.bits == 8 ? "|" : "<") + kind + std::to_string(dl.bits / 8);
}

std::optional<GpuStream> consumer_stream(const py::object& stream) {
  if (stream.is_none()) return kLegacyDefaultStream;
  if (!PyLong_Check(stream.ptr())) {
    throw ArgumentError("stream must be an int (a cudaStream_t, 1, 2, or -1) or None, not " +
                        std::string(py::repr(stream)));
  }
  const auto value = stream.cast<std::int64_t>();
  if (value == -1) return std::nullopt;
  if (value < -1) throw ArgumentError("stream " + std::to_string(value) + " is no CUDA stream");
  if (value == 0) return kLegacyDefaultStream;
  return reinterpret_cast<GpuStream>(static_cast<std::uintptr_t>(value));
}

py::object dlpack_capsule(const DeviceTensor& tensor, DLDevice device) {
  auto out = std::make_unique<DlpackExport>();
  out->tensor = tensor;
  out->shape = tensor.shape();
  out->strides = c_order_strides(tensor.shape(), 1);  // DLPack counts in elements
  DLTensor& dl = out->managed.dl_tensor;
  dl.data = tensor.data();
  dl.device = device;
  dl.ndim = static_cast<std::int32_t>(out->shape.size());
  dl.dtype = dlpack_dtype(tensor.dtype());
  dl.shape = out->shape.data();
  dl.strides = out->strides.data();
  dl.byte_offset = 0;
  out->managed.manager_ctx = out.get();
  out->managed.deleter = delete_export;
  PyObject* capsule = PyCapsule_New(&out->managed, kCapsuleName, destroy_capsule);
  if (capsule == nullptr) throw py::error_already_set();
  out.release();  // the capsule owns it now
  return py::reinterpret_steal<py::object>(capsule);
}

}  // namespace tensorcom::python
