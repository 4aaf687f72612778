// The tenbin codec and .ten files for Python: the C++ codec does the work;
// decoded arrays are views of the input (a buffer, a frame, a mapped file).
#include "tensorcom/codec/tenbin.h"

#include <Python.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "bindings.h"
#include "tensorcom/codec/ten_file.h"
#include "tensorcom/codec/ten_writer.h"

namespace tensorcom::python {

namespace {

// The bytes of a buffer-protocol object, held by a memoryview for as long as
// any tensor decoded from them lives.
struct HeldBytes {
  FrameView frame;
  bool readonly = true;
};

HeldBytes hold_bytes(py::handle object) {
  PyObject* view = PyMemoryView_FromObject(object.ptr());
  if (view == nullptr) throw py::error_already_set();
  py::object owner = py::reinterpret_steal<py::object>(view);
  const Py_buffer* buffer = PyMemoryView_GET_BUFFER(view);
  if (PyBuffer_IsContiguous(buffer, 'C') == 0) throw ArgumentError("tenbin input must be a contiguous buffer");
  const std::span<const std::byte> bytes(static_cast<const std::byte*>(buffer->buf),
                                         static_cast<std::size_t>(buffer->len));
  return {{bytes, python_owner(std::move(owner))}, buffer->readonly != 0};
}

py::tuple arrays_and_infos(const TensorList& tensors, bool writable) {
  return py::make_tuple(to_arrays(tensors, writable), infos_of(tensors));
}

py::bytearray encode_buffer(py::handle arrays, py::handle infos) {
  const TensorList tensors = to_tensors(arrays, infos);
  const std::size_t size = encoded_size(tensors);
  PyObject* out = PyByteArray_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
  if (out == nullptr) throw py::error_already_set();
  py::bytearray result = py::reinterpret_steal<py::bytearray>(out);
  std::span<std::byte> target(reinterpret_cast<std::byte*>(PyByteArray_AS_STRING(out)), size);
  without_gil([&] { (void)encode_into(tensors, target); });
  return result;
}

py::tuple decode_buffer(py::handle buffer) {
  HeldBytes held = hold_bytes(buffer);
  return arrays_and_infos(tensorcom::decode_buffer(held.frame.bytes, held.frame.owner), !held.readonly);
}

py::tuple decode_frames(py::handle frames) {
  std::vector<FrameView> views;
  bool readonly = false;
  for (py::handle frame : frames) {
    HeldBytes held = hold_bytes(frame);
    readonly = readonly || held.readonly;
    views.push_back(std::move(held.frame));
  }
  return arrays_and_infos(tensorcom::decode_frames(views), !readonly);
}

py::bytes encode_header(py::handle array, const std::string& info) {
  const Tensor tensor = to_tensor(array, info);
  std::string out(header_size(tensor), '\0');
  write_header(tensor, std::as_writable_bytes(std::span(out)));
  return py::bytes(out);
}

// The reference's decode_header: (shape, dtype, info) of a header payload.
py::tuple decode_header(py::handle header) {
  HeldBytes held = hold_bytes(header);
  const TensorHeader h = tensorcom::decode_header(held.frame.bytes);
  py::tuple shape(h.shape.size());
  for (std::size_t i = 0; i < h.shape.size(); ++i) shape[i] = py::int_(h.shape[i]);
  return py::make_tuple(shape, py::dtype(std::string(dtype_name(h.dtype))), h.info);
}

// [(offset, size), ...] of the payloads of a single buffer's chunks.
py::list chunk_spans(py::handle buffer) {
  HeldBytes held = hold_bytes(buffer);
  ChunkReader reader(held.frame.bytes);
  py::list out;
  while (auto payload = reader.next()) out.append(py::make_tuple(reader.payload_offset(), payload->size()));
  return out;
}

py::tuple read_ten(const std::string& path) {
  TensorList tensors = without_gil([&] { return tensorcom::read_ten(path); });
  // The arrays view a buffer read from the file (ten_file.h): writing never reaches the file.
  return arrays_and_infos(tensors, true);
}

py::list read_ten_lists(const std::string& path, std::size_t tensors_per_list) {
  std::vector<TensorList> lists = without_gil([&] { return tensorcom::read_ten_lists(path, tensors_per_list); });
  py::list out;
  for (const TensorList& list : lists) out.append(arrays_and_infos(list, true));
  return out;
}

void write_ten(const std::string& path, py::handle arrays, py::handle infos, bool append) {
  const TensorList tensors = to_tensors(arrays, infos);
  without_gil([&] {
    TenWriter writer(path, append ? TenWriter::Mode::kAppend : TenWriter::Mode::kTruncate);
    writer.write(tensors);
    writer.close();
  });
}

}  // namespace

void bind_tenbin(py::module_& m) {
  m.def("encode_buffer", &encode_buffer, py::arg("arrays"), py::arg("infos") = py::none(),
        "The single-buffer encoding of a list of arrays, as a new bytearray.");
  m.def("decode_buffer", &decode_buffer, py::arg("buffer"),
        "(arrays, infos) from a single buffer; the arrays view the buffer's memory.");
  m.def("decode_frames", &decode_frames, py::arg("frames"),
        "(arrays, infos) from multipart frames (header, data, ...); the arrays view the frames.");
  m.def("encode_header", &encode_header, py::arg("array"), py::arg("info") = "",
        "The header payload of one array: dtype code, info, ndim, dims as int64 words.");
  m.def(
      "wire_array", [](py::handle array) { return wire_array(array); }, py::arg("array"),
      "The array as it goes on the wire: C-contiguous, little-endian; itself when it already is.");
  m.def("decode_header", &decode_header, py::arg("header"),
        "(shape, dtype, info) of one header payload; FormatError if it is malformed.");
  m.def("chunk_spans", &chunk_spans, py::arg("buffer"),
        "[(offset, size), ...] of the chunk payloads of a single buffer; FormatError if it is malformed.");
  m.def("read_ten", &read_ten, py::arg("path"),
        "(arrays, infos): every tensor of a .ten file, viewing one buffer the file was read into.");
  m.def("read_ten_lists", &read_ten_lists, py::arg("path"), py::arg("tensors_per_list") = kInferListLength,
        "[(arrays, infos), ...]: a .ten file of lists back to back, split every tensors_per_list tensors "
        "(0: inferred from the tensors' signatures).");
  m.def("write_ten", &write_ten, py::arg("path"), py::arg("arrays"), py::arg("infos") = py::none(),
        py::arg("append") = false, "Writes one list to a .ten file (truncating it, or appending).");
}

}  // namespace tensorcom::python
