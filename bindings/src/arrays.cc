// numpy arrays <-> Tensor views, without copying in either direction.
#include <pybind11/stl.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <mutex>
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

// Objects whose last owner went on a thread without the GIL.
class PutAside {
 public:
  void add(PyObject* object) {
    std::lock_guard lock(mutex_);
    objects_.push_back(object);
  }

  std::vector<PyObject*> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(objects_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<PyObject*> objects_;
};

PutAside& put_aside() {
  static auto* objects = new PutAside;  // never destroyed: owners may drop during exit
  return *objects;
}

void release_python_object(const void* pointer) {
  auto* object = static_cast<PyObject*>(const_cast<void*>(pointer));
  // Leaked while the process ends: the interpreter may be gone.
  if (Py_IsInitialized() == 0 || interpreter_finalizing()) return;
  if (PyGILState_Check() == 0) {
    put_aside().add(object);
    return;
  }
  Py_DECREF(object);
}

// The tenbin dtype of a numpy dtype, if it has one. Read through Python
// attributes: pybind11 before 2.12 reads kind() and itemsize() from NumPy
// 1's PyArray_Descr layout, and NumPy 2 moved its fields (every dtype
// looked unknown there).
std::optional<DType> tenbin_dtype(const py::dtype& dtype) {
  const std::string kind = dtype.attr("kind").cast<std::string>();
  if (kind != "f" && kind != "i" && kind != "u") return std::nullopt;
  return dtype_from_code(kind + std::to_string(dtype.attr("itemsize").cast<int>()));
}

bool native_byte_order(const py::dtype& dtype) {
  const char order = dtype.attr("byteorder").cast<std::string>().at(0);
  return order == '=' || order == '|' || order == '<';
}

std::string type_name(py::handle object) { return py::str(py::type::handle_of(object).attr("__name__")); }

}  // namespace

std::shared_ptr<const void> python_owner(py::object object) {
  release_put_aside();
  return std::shared_ptr<const void>(object.release().ptr(), release_python_object);
}

void release_put_aside() noexcept {
  for (PyObject* object : put_aside().take()) Py_DECREF(object);
}

TensorList borrowed_views(const TensorList& tensors) {
  TensorList out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    out.push_back(Tensor::view(t.dtype(), t.shape(), const_cast<std::byte*>(t.data()), nullptr, t.info()));
  }
  return out;
}

std::vector<std::int64_t> c_order_strides(const Shape& shape, std::int64_t item) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t step = item;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

py::array to_array(const Tensor& tensor, bool writable) {
  const std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  auto* held = new Tensor(tensor);
  py::capsule base(held, [](void* pointer) { delete static_cast<Tensor*>(pointer); });
  // Strides given explicitly: pybind11 before 2.12 computes default strides
  // from NumPy 1's PyArray_Descr layout, which under NumPy 2 reads a zero
  // item size (every element would alias the first).
  const std::vector<std::int64_t> strides =
      c_order_strides(tensor.shape(), static_cast<std::int64_t>(itemsize(tensor.dtype())));
  py::array array(py::dtype(std::string(dtype_name(tensor.dtype()))), shape,
                  std::vector<py::ssize_t>(strides.begin(), strides.end()), held->data(), base);
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
