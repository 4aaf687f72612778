// numpy arrays <-> Tensor views, without copying in either direction.
#include <pybind11/stl.h>

#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"

namespace tensorcom::python {

static_assert(std::endian::native == std::endian::little, "tenbin is little-endian; so must the host be");

namespace {

bool interpreter_finalizing() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

void release_python_object(const void* pointer) {
  auto* held = static_cast<py::object*>(const_cast<void*>(pointer));
  if (!Py_IsInitialized() || interpreter_finalizing()) {
    // Taking the GIL now could hang this thread; the process is ending anyway.
    (void)held->release();
    delete held;
    return;
  }
  py::gil_scoped_acquire gil;
  delete held;
}

// The tenbin dtype of a numpy dtype, if it has one.
std::optional<DType> tenbin_dtype(const py::dtype& dtype) {
  const char kind = dtype.kind();
  if (kind != 'f' && kind != 'i' && kind != 'u') return std::nullopt;
  return dtype_from_code(std::string(1, kind) + std::to_string(dtype.itemsize()));
}

bool native_byte_order(const py::dtype& dtype) {
  const char order = dtype.attr("byteorder").cast<std::string>().at(0);
  return order == '=' || order == '|' || order == '<';
}

std::string type_name(py::handle object) { return py::str(py::type::handle_of(object).attr("__name__")); }

}  // namespace

std::shared_ptr<const void> python_owner(py::object object) {
  return std::shared_ptr<const void>(new py::object(std::move(object)), release_python_object);
}

py::array to_array(const Tensor& tensor, bool writable) {
  const std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  auto* held = new Tensor(tensor);
  py::capsule base(held, [](void* pointer) { delete static_cast<Tensor*>(pointer); });
  py::array array(py::dtype(std::string(dtype_name(tensor.dtype()))), shape, held->data(), base);
  if (!writable) array.attr("setflags")(py::arg("write") = false);
  return array;
}

py::list to_arrays(const TensorList& tensors, bool writable) {
  py::list out;
  for (const Tensor& tensor : tensors) out.append(to_array(tensor, writable));
  return out;
}

py::list infos_of(const TensorList& tensors) {
  py::list out;
  for (const Tensor& tensor : tensors) out.append(py::str(std::string(tensor.info())));
  return out;
}

py::array wire_array(py::handle object) {
  py::array array = py::array::ensure(object);
  if (!array) throw ArgumentError("a " + type_name(object) + " cannot be converted to a numpy array");
  const std::optional<DType> dtype = tenbin_dtype(array.dtype());
  if (!dtype) throw ArgumentError("dtype " + std::string(py::str(array.dtype())) + " has no tenbin code");
  if ((array.flags() & py::array::c_style) != 0 && native_byte_order(array.dtype())) return array;
  return py::module_::import("numpy").attr("ascontiguousarray")(array, py::dtype(std::string(dtype_name(*dtype))));
}

Tensor to_tensor(py::handle object, std::string_view info) {
  py::array array = wire_array(object);
  const DType dtype = *tenbin_dtype(array.dtype());
  Shape shape(array.shape(), array.shape() + array.ndim());
  void* data = const_cast<void*>(array.data());
  return Tensor::view(dtype, std::move(shape), data, python_owner(array), info);
}

TensorList to_tensors(py::handle arrays, py::handle infos) {
  if (py::isinstance<py::array>(arrays) || py::isinstance<py::str>(arrays) || !py::isinstance<py::sequence>(arrays)) {
    throw ArgumentError("expected a list of arrays, got a " + type_name(arrays));
  }
  const py::sequence items = py::reinterpret_borrow<py::sequence>(arrays);
  std::vector<std::string> names;
  if (!infos.is_none()) {
    names = infos.cast<std::vector<std::string>>();
    if (names.size() != items.size()) {
      throw ArgumentError(std::to_string(names.size()) + " infos for " + std::to_string(items.size()) + " arrays");
    }
  }
  TensorList tensors;
  tensors.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    tensors.push_back(to_tensor(items[i], names.empty() ? std::string_view() : std::string_view(names[i])));
  }
  return tensors;
}

}  // namespace tensorcom::python
