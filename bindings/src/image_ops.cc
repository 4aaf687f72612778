// The policies' colour and geometric operations (tensorcom/imaging/
// color_ops.h, geometric_ops.h) on NumPy images, in place, with the GIL
// released: for the fidelity tests and for auditing a served sample.
#include "tensorcom/imaging/auto_augment.h"
#include "tensorcom/imaging/color_jitter.h"
#include "tensorcom/imaging/color_ops.h"
#include "tensorcom/imaging/random_erasing.h"
#include "tensorcom/imaging/sample_rng.h"
#include "tensorcom/imaging/geometric_ops.h"

#include <array>
#include <cmath>
#include <functional>
#include <vector>
#include <map>

#include <pybind11/stl.h>

#include "bindings.h"

namespace tensorcom::python {

namespace {

using Operation = std::function<void(imaging::RgbImage, double, const imaging::GeometricOptions&)>;
using imaging::GeometricOptions;

using OpList = std::vector<std::pair<std::string, double>>;

// The array as an image the operations work on in place, through the
// buffer protocol: NumPy 1 and 2 alike, and never a converted copy (a
// float array is refused, not cast to a temporary that takes the changes).
struct RgbBuffer {
  py::buffer_info info;
  imaging::RgbImage view;
};

RgbBuffer rgb_view(const py::buffer& image) {
  py::buffer_info info;
  try {
    info = image.request(true);
  } catch (const py::error_already_set&) {
    throw ArgumentError("the image must be a writable C-contiguous array");
  }
  if (info.itemsize != 1 || info.format != "B" || info.ndim != 3 || info.shape[2] != 3) {
    throw ArgumentError("the image must be a uint8 (H, W, 3) array");
  }
  if (info.strides[2] != 1 || info.strides[1] != 3 || info.strides[0] != 3 * info.shape[1]) {
    throw ArgumentError("the image must be a writable C-contiguous array");
  }
  auto* pixels = static_cast<std::uint8_t*>(info.ptr);
  const imaging::RgbImage view{pixels, static_cast<int>(info.shape[1]), static_cast<int>(info.shape[0])};
  return {std::move(info), view};
}

std::vector<std::uint8_t>& scratch() {
  thread_local std::vector<std::uint8_t> bytes;
  return bytes;
}

const std::map<std::string, Operation, std::less<>>& operations() {
  using namespace imaging;
  static const std::map<std::string, Operation, std::less<>> table{
      {"invert", [](RgbImage i, double, const GeometricOptions&) { invert(i); }},
      {"posterize", [](RgbImage i, double bits, const GeometricOptions&) { posterize(i, static_cast<int>(bits)); }},
      {"solarize", [](RgbImage i, double threshold, const GeometricOptions&) { solarize(i, threshold); }},
      {"autocontrast", [](RgbImage i, double, const GeometricOptions&) { autocontrast(i); }},
      {"equalize", [](RgbImage i, double, const GeometricOptions&) { equalize(i); }},
      {"brightness", [](RgbImage i, double f, const GeometricOptions&) { adjust_brightness(i, f); }},
      {"saturation", [](RgbImage i, double f, const GeometricOptions&) { adjust_saturation(i, f); }},
      {"contrast", [](RgbImage i, double f, const GeometricOptions&) { adjust_contrast(i, f); }},
      {"sharpness", [](RgbImage i, double f, const GeometricOptions&) { adjust_sharpness(i, f); }},
      {"hue", [](RgbImage i, double f, const GeometricOptions&) { adjust_hue(i, f); }},
      {"grayscale", [](RgbImage i, double, const GeometricOptions&) { to_grayscale(i); }},
      {"shear_x", [](RgbImage i, double m, const GeometricOptions& o) { shear_x(i, m, o, scratch()); }},
      {"shear_y", [](RgbImage i, double m, const GeometricOptions& o) { shear_y(i, m, o, scratch()); }},
      {"translate_x", [](RgbImage i, double m, const GeometricOptions& o) { translate_x(i, m, o, scratch()); }},
      {"translate_y", [](RgbImage i, double m, const GeometricOptions& o) { translate_y(i, m, o, scratch()); }},
      {"rotate", [](RgbImage i, double m, const GeometricOptions& o) { rotate(i, m, o, scratch()); }},
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

}  // namespace

GeometricOptions geometric_options(const std::string& interpolation, std::array<int, 3> fill) {
  GeometricOptions options;
  const auto parsed = imaging::parse_policy_interpolation(interpolation);
  if (!parsed) {
    throw ArgumentError("interpolation must be 'nearest', 'bilinear' or 'bicubic', not '" + interpolation + "'");
  }
  options.interpolation = *parsed;
  for (int c = 0; c < 3; ++c) {
    if (fill[c] < 0 || fill[c] > 255) throw ArgumentError("fill values must be from 0 to 255");
    options.fill[c] = static_cast<std::uint8_t>(fill[c]);
  }
  return options;
}

imaging::AutoAugmentOptions policy_options(const std::string& policy, int num_ops, int magnitude, int bins,
                                           const std::string& interpolation, std::array<int, 3> fill) {
  imaging::AutoAugmentOptions options;
  options.kind = imaging::parse_policy_kind(policy);
  options.num_ops = num_ops;
  options.magnitude = magnitude;
  options.num_magnitude_bins = bins;
  const bool timm = options.kind == imaging::PolicyKind::kTimmRandAugment;
  // "default": timm's random choice for its strings, nearest for torchvision's.
  const bool random = timm && (interpolation == "random" || interpolation == "default");
  if (timm) {
    options.timm_config = policy;
    options.timm_random_interpolation = random;
  }
  options.geometric = geometric_options(random                       ? "bilinear"
                                        : interpolation == "default" ? "nearest"
                                                                     : interpolation,
                                        fill);
  (void)imaging::AutoAugmentPolicy(options);  // refuses bad arguments now
  return options;
}

std::optional<imaging::ColorJitterOptions> jitter_options(const std::vector<double>& ranges) {
  if (ranges.empty()) return std::nullopt;
  if (ranges.size() != 8) throw ArgumentError("color jitter: expected 4 (low, high) pairs");
  imaging::ColorJitterOptions options;
  std::optional<std::pair<double, double>>* fields[4] = {&options.brightness, &options.contrast, &options.saturation,
                                                         &options.hue};
  for (std::size_t i = 0; i < 4; ++i) {
    const double low = ranges[2 * i], high = ranges[2 * i + 1];
    if (std::isnan(low) && std::isnan(high)) continue;  // that adjustment is off
    if (!(low <= high) || !std::isfinite(low) || !std::isfinite(high)) {
      throw ArgumentError("color jitter: a range must be finite, low <= high");
    }
    *fields[i] = std::pair{low, high};
  }
  return options;
}

namespace {

OpList color_jitter_draw(const std::vector<double>& ranges, double grayscale_probability, std::uint64_t seed,
                         std::uint64_t sequence) {
  auto rng = imaging::sample_rng(seed, sequence);
  std::vector<imaging::AppliedOp> ops;
  imaging::draw_color_jitter(jitter_options(ranges).value_or(imaging::ColorJitterOptions{}), grayscale_probability, rng,
                             ops);
  OpList out;
  for (const imaging::AppliedOp& op : ops) out.emplace_back(imaging::recorded_op_name(op), op.magnitude);
  return out;
}

std::optional<std::array<std::int32_t, 4>> random_erasing_draw(int width, int height, double p,
                                                               std::array<double, 2> scale, std::array<double, 2> ratio,
                                                               std::uint64_t seed, std::uint64_t sequence) {
  if (width <= 0 || height <= 0) throw ArgumentError("image size must be positive");
  imaging::RandomErasingOptions options;
  options.probability = p;
  options.scale = {scale[0], scale[1]};
  options.ratio = {ratio[0], ratio[1]};
  imaging::check_random_erasing(options);
  auto rng = imaging::sample_rng(seed, sequence);
  return imaging::draw_erase_box(width, height, options, rng);
}

void image_op(const std::string& name, const py::buffer& image, double argument, const std::string& interpolation,
              std::array<int, 3> fill) {
  const auto found = operations().find(name);
  if (found == operations().end()) throw ArgumentError("no image operation named '" + name + "'");
  const GeometricOptions options = geometric_options(interpolation, fill);
  check_argument(name, argument);
  const RgbBuffer buffer = rgb_view(image);
  const py::gil_scoped_release release;
  found->second(buffer.view, argument, options);
}

OpList auto_augment_draw(const std::string& policy, int width, int height, std::uint64_t seed, std::uint64_t sequence,
                         int num_ops, int magnitude, int num_magnitude_bins, const std::string& interpolation) {
  if (width <= 0 || height <= 0) throw ArgumentError("image size must be positive");
  const imaging::AutoAugmentPolicy drawer(
      policy_options(policy, num_ops, magnitude, num_magnitude_bins, interpolation, {0, 0, 0}));
  auto rng = imaging::sample_rng(seed, sequence);
  OpList out;
  for (const imaging::AppliedOp& op : drawer.draw(width, height, rng)) {
    out.emplace_back(imaging::recorded_op_name(op), op.magnitude);
  }
  return out;
}

void auto_augment_apply(const py::buffer& image, const OpList& ops, const std::string& interpolation,
                        std::array<int, 3> fill) {
  std::vector<imaging::AppliedOp> applied;
  for (const auto& [name, magnitude] : ops) {
    if (!std::isfinite(magnitude)) throw ArgumentError(name + ": the magnitude must be finite");
    applied.push_back(imaging::op_from_record(name, magnitude));
  }
  const GeometricOptions options = geometric_options(interpolation, fill);
  const RgbBuffer buffer = rgb_view(image);
  const py::gil_scoped_release release;
  imaging::apply_ops(applied, buffer.view, options, scratch());
}

}  // namespace

void bind_image_ops(py::module_& m) {
  m.def("auto_augment_draw", &auto_augment_draw, py::arg("policy"), py::arg("width"), py::arg("height"),
        py::arg("seed"), py::arg("sequence"), py::arg("num_ops") = 2, py::arg("magnitude") = 9,
        py::arg("num_magnitude_bins") = 31, py::arg("interpolation") = "default",
        "the operations a policy (ta_wide, ra, imagenet, or a timm string rand-...) draws for sample (seed, "
        "sequence) of a width x height crop: [(recorded op name, signed magnitude)]; interpolation matters to timm's "
        "(default: random)");
  m.def("auto_augment_apply", &auto_augment_apply, py::arg("image"), py::arg("ops"),
        py::arg("interpolation") = "nearest", py::arg("fill") = std::array<int, 3>{0, 0, 0},
        "applies drawn operations [(name, magnitude)] in place, as torchvision's _apply_op does on PIL images");
  m.def("random_erasing_draw", &random_erasing_draw, py::arg("width"), py::arg("height"), py::arg("p"),
        py::arg("scale"), py::arg("ratio"), py::arg("seed"), py::arg("sequence"),
        "RandomErasing's box [top, left, height, width] for sample (seed, sequence), or None");
  m.def("color_jitter_draw", &color_jitter_draw, py::arg("ranges"), py::arg("grayscale_probability"), py::arg("seed"),
        py::arg("sequence"),
        "ColorJitter's and RandomGrayscale's draws for sample (seed, sequence): ranges are (low, high) of brightness, "
        "contrast, saturation and hue, NaN for off");
  m.def(
      "_torch_linspace",
      [](double start, double end, int steps) {
        if (steps < 1) throw ArgumentError("steps must be positive");
        std::vector<float> out;
        for (int i = 0; i < steps; ++i) out.push_back(imaging::torch_linspace_at(start, end, steps, i));
        return out;
      },
      py::arg("start"), py::arg("end"), py::arg("steps"), "torch.linspace in float32, as the policies' bins use it");
  m.def("image_op", &image_op, py::arg("name"), py::arg("image"), py::arg("argument") = 0.0,
        py::arg("interpolation") = "nearest", py::arg("fill") = std::array<int, 3>{0, 0, 0},
        "applies an operation of the augmentation policies (invert, posterize, solarize, autocontrast, equalize, "
        "brightness, saturation, contrast, sharpness, hue, grayscale, shear_x, shear_y, translate_x, translate_y, "
        "rotate) in place to a uint8 (H, W, 3) image, as torchvision computes it on a PIL image");
}

}  // namespace tensorcom::python
