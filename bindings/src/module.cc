// tensorcom._tensorcom: the C++ library for Python. The package tensorcom
// (bindings/tensorcom/) builds the reference's API on top of it.
#include "bindings.h"

PYBIND11_MODULE(_tensorcom, m) {
  m.doc() = "tensorcom's C++ core: the tenbin codec, .ten files, Connection, the imaging engine, the GPU feeder";
  tensorcom::python::bind_errors(m);
  tensorcom::python::bind_tenbin(m);
  tensorcom::python::bind_connection(m);
  tensorcom::python::bind_imaging(m);
  tensorcom::python::bind_image_ops(m);
  tensorcom::python::bind_batch_mix(m);
  tensorcom::python::bind_gpu(m);
}
