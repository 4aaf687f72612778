// Shared pieces of the _tensorcom extension: numpy arrays as Tensor views and
// back, owners that hold Python objects, and the binders of each part.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <string_view>

#include "tensorcom/tensor.h"

namespace tensorcom::python {

namespace py = pybind11;

// An owner for Tensor views that keeps object alive. Its deleter takes the
// GIL, so the last reference may be dropped on any thread (ZeroMQ's I/O
// thread drops the owners of sent frames); during interpreter shutdown the
// object is leaked instead. REQUIRES: the GIL is held.
[[nodiscard]] std::shared_ptr<const void> python_owner(py::object object);

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

void bind_errors(py::module_& m);
void bind_tenbin(py::module_& m);
void bind_connection(py::module_& m);
void bind_imaging(py::module_& m);

}  // namespace tensorcom::python
