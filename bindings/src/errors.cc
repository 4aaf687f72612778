// The C++ error family as Python exceptions. Each class derives from
// tensorcom.Error and, where one fits, from the builtin exception Python code
// would catch for that failure (ValueError for bad input, OSError for files,
// TimeoutError for silence). The message is what() of the C++ exception.
#include <Python.h>

#include <string>

#include "bindings.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/imaging/problem.h"

namespace tensorcom::python {

namespace {

struct ExceptionClasses {
  py::object error, format, argument, io, url, transport, timeout, unavailable, image;
};

// Set once at import; the module keeps the classes alive.
ExceptionClasses* classes = nullptr;

py::object make_class(py::module_& m, const char* name, const char* doc, py::tuple bases,
                      const py::dict& members = py::dict()) {
  const std::string qualified = std::string("tensorcom.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), members.ptr());
  if (cls == nullptr) throw py::error_already_set();
  py::object out = py::reinterpret_steal<py::object>(cls);
  m.attr(name) = out;
  return out;
}

// Raises an instance of cls carrying message, with attributes set.
void raise(const py::object& cls, const char* message, const py::dict& attributes = {}) {
  py::object exception = cls(message);
  for (auto item : attributes) exception.attr(item.first) = item.second;
  PyErr_SetObject(cls.ptr(), exception.ptr());
}

// ImageError.problem: what raised it said (kept in _problem), or else read
// back from the message. A DataLoader worker's exception reaches the main
// process as its type and its message alone (torch re-raises
// type(message), the worker's traceback in the message), and a pickled one
// as its message: both still hold "<problem name>: <detail>", after
// "ImageError: " for the re-raised one.
py::object image_problem(const py::handle& self) {
  const py::dict attributes = self.attr("__dict__");
  if (attributes.contains("_problem")) return attributes["_problem"];
  const std::string text = py::str(self);
  for (const imaging::Problem problem : imaging::kAllProblems) {
    const std::string said = std::string(imaging::problem_name(problem)) + ": ";
    if (text.rfind(said, 0) == 0 || text.find("ImageError: " + said) != std::string::npos) {
      return py::str(imaging::problem_name(problem));
    }
  }
  return py::none();
}

void translate(std::exception_ptr pointer) {
  try {
    std::rethrow_exception(pointer);
  } catch (const FormatError& e) {
    raise(classes->format, e.what(), py::dict(py::arg("offset") = e.offset()));
  } catch (const ArgumentError& e) {
    raise(classes->argument, e.what());
  } catch (const IoError& e) {
    raise(classes->io, e.what(), py::dict(py::arg("errno") = e.code(), py::arg("code") = e.code()));
  } catch (const UrlError& e) {
    raise(classes->url, e.what());
  } catch (const TimeoutError& e) {
    raise(classes->timeout, e.what(), py::dict(py::arg("code") = e.code()));
  } catch (const TransportError& e) {
    raise(classes->transport, e.what(), py::dict(py::arg("code") = e.code()));
  } catch (const UnavailableError& e) {
    raise(classes->unavailable, e.what());
  } catch (const imaging::ImageError& e) {
    raise(classes->image, e.what(), py::dict(py::arg("_problem") = std::string(imaging::problem_name(e.problem()))));
  } catch (const Error& e) {
    raise(classes->error, e.what());
  }
}

}  // namespace

void bind_errors(py::module_& m) {
  const py::module_ builtins = py::module_::import("builtins");
  auto* c = new ExceptionClasses;
  c->error = make_class(m, "Error", "Base of every tensorcom exception.", py::make_tuple(builtins.attr("Exception")));
  c->format = make_class(m, "FormatError", "Malformed tenbin input; offset is the byte offset of the bad field.",
                         py::make_tuple(c->error, builtins.attr("ValueError")));
  c->argument = make_class(m, "ArgumentError", "An argument the API cannot accept.",
                           py::make_tuple(c->error, builtins.attr("ValueError")));
  c->io = make_class(m, "IoError", "A file operation failed; errno says why.",
                     py::make_tuple(c->error, builtins.attr("OSError")));
  c->url = make_class(m, "UrlError", "A tensorcom URL that cannot be used.",
                      py::make_tuple(c->error, builtins.attr("ValueError")));
  c->transport =
      make_class(m, "TransportError", "ZeroMQ failed; code is its errno (0 if none).", py::make_tuple(c->error));
  c->timeout = make_class(m, "TimeoutError", "Every peer was silent past the timeout.",
                          py::make_tuple(c->transport, builtins.attr("TimeoutError")));
  py::dict image_members;
  image_members["problem"] = builtins.attr("property")(py::cpp_function(image_problem));
  c->image = make_class(m, "ImageError", "An image that cannot be decoded; problem names why (\"undecodable\", ...).",
                        py::make_tuple(c->error, builtins.attr("ValueError")), image_members);
  c->unavailable = make_class(m, "UnavailableError", "A feature this build of tensorcom was configured without.",
                              py::make_tuple(c->error, builtins.attr("NotImplementedError")));
  classes = c;
  py::register_exception_translator(translate);
}

}  // namespace tensorcom::python
