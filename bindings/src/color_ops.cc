// The colour operations (tensorcom/imaging/color_ops.h) on NumPy images,
// in place, with the GIL released.
#include "tensorcom/imaging/color_ops.h"

#include <functional>
#include <map>

#include "bindings.h"

namespace tensorcom::python {

namespace {

using Operation = std::function<void(imaging::RgbImage, double)>;

const std::map<std::string, Operation, std::less<>>& operations() {
  using namespace imaging;
  static const std::map<std::string, Operation, std::less<>> table{
      {"invert", [](RgbImage i, double) { invert(i); }},
      {"posterize", [](RgbImage i, double bits) { posterize(i, static_cast<int>(bits)); }},
      {"solarize", [](RgbImage i, double threshold) { solarize(i, threshold); }},
      {"autocontrast", [](RgbImage i, double) { autocontrast(i); }},
      {"equalize", [](RgbImage i, double) { equalize(i); }},
      {"brightness", [](RgbImage i, double f) { adjust_brightness(i, f); }},
      {"saturation", [](RgbImage i, double f) { adjust_saturation(i, f); }},
      {"contrast", [](RgbImage i, double f) { adjust_contrast(i, f); }},
      {"sharpness", [](RgbImage i, double f) { adjust_sharpness(i, f); }},
      {"hue", [](RgbImage i, double f) { adjust_hue(i, f); }},
      {"grayscale", [](RgbImage i, double) { to_grayscale(i); }},
  };
  return table;
}

void check_argument(std::string_view name, double argument) {
  if (name == "posterize" && !(argument >= 0 && argument <= 8 && argument == static_cast<int>(argument))) {
    throw ArgumentError("posterize: bits must be an integer from 0 to 8, not " + std::to_string(argument));
  }
  if (!std::isfinite(argument)) throw ArgumentError(std::string(name) + ": the argument must be finite");
  if (name == "hue" && !(argument >= -0.5 && argument <= 0.5)) {
    throw ArgumentError("hue: the factor must be in [-0.5, 0.5], not " + std::to_string(argument));
  }
  if ((name == "brightness" || name == "saturation" || name == "contrast" || name == "sharpness") && argument < 0) {
    throw ArgumentError(std::string(name) + ": the factor must not be negative, not " + std::to_string(argument));
  }
}

void color_op(const std::string& name, py::array_t<std::uint8_t> image, double argument) {
  const auto found = operations().find(name);
  if (found == operations().end()) throw ArgumentError("no colour operation named '" + name + "'");
  check_argument(name, argument);
  if (image.ndim() != 3 || image.shape(2) != 3) throw ArgumentError("the image must be a uint8 (H, W, 3) array");
  if (!(image.flags() & py::array::c_style) || !image.writeable()) {
    throw ArgumentError("the image must be a writable C-contiguous array");
  }
  const imaging::RgbImage view{image.mutable_data(), static_cast<int>(image.shape(1)),
                               static_cast<int>(image.shape(0))};
  const py::gil_scoped_release release;
  found->second(view, argument);
}

}  // namespace

void bind_color_ops(py::module_& m) {
  m.def("color_op", &color_op, py::arg("name"), py::arg("image"), py::arg("argument") = 0.0,
        "applies a colour operation (invert, posterize, solarize, autocontrast, equalize, brightness, saturation, "
        "contrast, sharpness, hue, grayscale) in place to a uint8 (H, W, 3) image, with Pillow's arithmetic");
}

}  // namespace tensorcom::python
