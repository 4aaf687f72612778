// DLPack export of tensorcom's device tensors (bindings/src/gpu.cc): the
// legacy (unversioned) DLManagedTensor in a "dltensor" capsule, as the DLPack
// C ABI (https://github.com/dmlc/dlpack) defines it and every consumer,
// torch.from_dlpack included, accepts; and the array API's convention for
// naming CUDA streams.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bindings.h"
#include "tensorcom/gpu/device_tensor.h"
#include "tensorcom/gpu/gpu_feeder.h"

namespace tensorcom::python {

enum DLDeviceType : std::int32_t { kDLCPU = 1, kDLCUDA = 2 };

struct DLDevice {
  std::int32_t device_type;
  std::int32_t device_id;
};

// A "dltensor" capsule of `tensor` on `device`. The capsule (or, once a
// consumer renamed it, the consumer's call of the deleter) owns a copy of
// the tensor, whose owner keeps its memory out of the feeder's pool.
[[nodiscard]] py::object dlpack_capsule(const DeviceTensor& tensor, DLDevice device);

// NumPy's type string for __cuda_array_interface__. Throws
// py::attribute_error for bfloat16, which has none.
[[nodiscard]] std::string typestr(DeviceDType dtype);

// The stream a consumer names, by the array API's convention for CUDA: None
// or 1 the legacy default stream, 2 the per-thread default stream, any other
// positive number a cudaStream_t; -1 names none (the consumer orders its reads
// itself: nothing to wait for). 0, which the array API leaves out as
// ambiguous, is taken as the legacy default stream, as CUDA takes a null
// stream in code built without per-thread default streams.
[[nodiscard]] std::optional<GpuStream> consumer_stream(const py::object& stream);

}  // namespace tensorcom::python
