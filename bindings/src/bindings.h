// Shared pieces of the _tensorcom extension: numpy arrays as Tensor views and
// back, owners that hold Python objects, and the binders of each part.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tensorcom/transport/connection.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/codec/tensor.h"
#include "tensorcom/imaging/auto_augment.h"
#include "tensorcom/imaging/color_jitter.h"

namespace tensorcom::python {

namespace py = pybind11;

// Runs work() without the GIL and returns what it returns. Unlike
// py::gil_scoped_release, the GIL is taken back in ordinary code, never in a
// destructor: Python ends a daemon thread that wants the GIL while the
// interpreter finalizes by unwinding it (pthread_exit), and unwinding out of
// a destructor (noexcept) would terminate the whole process instead.
template <class Work>
auto without_gil(Work&& work) {
  using Result = std::invoke_result_t<Work&>;
  std::exception_ptr failure;
  PyThreadState* state = PyEval_SaveThread();
  if constexpr (std::is_void_v<Result>) {
    try {
      work();
    } catch (...) {
      failure = std::current_exception();
    }
    PyEval_RestoreThread(state);
    if (failure) std::rethrow_exception(failure);
  } else {
    std::optional<Result> result;
    try {
      result.emplace(work());
    } catch (...) {
      failure = std::current_exception();
    }
    PyEval_RestoreThread(state);
    if (failure) std::rethrow_exception(failure);
    return std::move(*result);
  }
}

// An owner for Tensor views that keeps object alive. The last reference may
// be dropped on any thread: where the GIL is not held (ZeroMQ's I/O thread
// drops the owners of sent frames) the object is put aside, never the GIL
// taken there, and released by the next release_put_aside(); during
// interpreter shutdown it is leaked. REQUIRES: the GIL is held.
[[nodiscard]] std::shared_ptr<const void> python_owner(py::object object);

// Releases the objects put aside by owners dropped without the GIL; every
// send and receive calls it. REQUIRES: the GIL is held.
void release_put_aside() noexcept;

// A numpy array viewing the tensor's memory. The array's base is a capsule
// holding a copy of the tensor, so the tensor's owner (a received message, a
// mapped file) lives as long as the array or any view of it.
[[nodiscard]] py::array to_array(const Tensor& tensor, bool writable = true);

// The tensors as a list of arrays, and their infos as a list of str.
[[nodiscard]] py::list to_arrays(const TensorList& tensors, bool writable = true);
[[nodiscard]] py::list infos_of(const TensorList& tensors);

// The array in wire form: C-contiguous, little-endian, with a tenbin dtype.
// Returns the array itself when it already is (no copy), else a converted
// copy. Throws ArgumentError for a dtype tenbin has no code for.
[[nodiscard]] py::array wire_array(py::handle object);

// A Tensor viewing the wire form of object (see wire_array), holding it alive.
// Throws ArgumentError for a dtype without a code or an info over 8 chars.
[[nodiscard]] Tensor to_tensor(py::handle object, std::string_view info = {});

// Tensors for a list of arrays; infos (None or a sequence of str) is used
// round-robin, as the reference does.
[[nodiscard]] TensorList to_tensors(py::handle arrays, py::handle infos);

// Views of the same memory without owners: what is sent from them is copied
// while the caller keeps the tensors (and their owners) alive.
[[nodiscard]] TensorList borrowed_views(const TensorList& tensors);

// The strides of a C-order array of `shape` whose items take `item` units
// (bytes for NumPy, 1 for DLPack's elements).
[[nodiscard]] std::vector<std::int64_t> c_order_strides(const Shape& shape, std::int64_t item);

// Seconds from Python as milliseconds. Throws ArgumentError (naming the
// argument) unless 0 <= seconds <= 1e9.
[[nodiscard]] Milliseconds to_milliseconds(double seconds, const char* name);
// A timeout in seconds (None: none), as to_milliseconds.
[[nodiscard]] std::optional<Milliseconds> to_timeout(std::optional<double> seconds);

// What the GPU feeder (gpu.cc) needs of a tensorcom._Connection.
class SharedConnection {
 public:
  virtual ~SharedConnection() = default;
  // The next batch, or nothing within `wait`; as _Connection.recv, under the
  // same lock. REQUIRES: the GIL is not held (it is never taken).
  [[nodiscard]] virtual std::optional<TensorList> receive(Milliseconds wait) = 0;
  // The connection's silence limit (none: wait forever), and the error that
  // reports it.
  [[nodiscard]] virtual std::optional<Milliseconds> timeout() const = 0;
  [[nodiscard]] virtual TimeoutError silence_error() const = 0;
};

// The C++ connection of a _Connection; valid while the Python object lives.
// Throws py::cast_error for another object. REQUIRES: the GIL is held.
[[nodiscard]] SharedConnection& shared_connection(py::handle connection);

void bind_errors(py::module_& m);
void bind_tenbin(py::module_& m);
void bind_connection(py::module_& m);
void bind_imaging(py::module_& m);
void bind_image_ops(py::module_& m);
void bind_batch_mix(py::module_& m);
// The policies' geometric options and a checked policy (image_ops.cc);
// throw ArgumentError naming what is wrong.
imaging::GeometricOptions geometric_options(const std::string& interpolation, std::array<int, 3> fill);
imaging::AutoAugmentOptions policy_options(const std::string& policy, int num_ops, int magnitude, int bins,
                                           const std::string& interpolation, std::array<int, 3> fill);
// ColorJitter's (low, high) ranges of brightness, contrast, saturation and
// hue, NaN for off; nothing for no ranges.
std::optional<imaging::ColorJitterOptions> jitter_options(const std::vector<double>& ranges);
void bind_gpu(py::module_& m);

}  // namespace tensorcom::python
