// tensorcom.imaging's engine: decoding and torchvision's transforms on
// encoded images, with the GIL released while the C++ works. One
// ImageTransform serves any number of threads: each call borrows an
// augmenter (decoder and scratch memory) from the transform's pool.
#include <pybind11/stl.h>

#include <mutex>
#include <vector>

#include "bindings.h"
#include "pixel_pool.h"
#include "tensorcom/imaging/augmenter.h"
#include "tensorcom/imaging/format.h"
#include "tensorcom/imaging/planar.h"
#include "tensorcom/imaging/sample_rng.h"

namespace tensorcom::python {

namespace {

using imaging::ImageAugmenter;
using imaging::PixelBox;
using imaging::Size;
using imaging::Transform;

bool is_c_contiguous(const py::buffer_info& info) {
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.strides[d] != expected) return false;
    expected *= info.shape[d];
  }
  return true;
}

// The encoded bytes of any object with the buffer protocol (bytes,
// bytearray, memoryview, a uint8 numpy array), held while in use.
class EncodedBytes {
 public:
  explicit EncodedBytes(const py::buffer& buffer) : info_(buffer.request()) {
    if (info_.ndim > 1 && !is_c_contiguous(info_)) {
      throw ArgumentError("encoded image: a buffer that is not contiguous");
    }
  }
  [[nodiscard]] std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(info_.ptr), static_cast<std::size_t>(info_.size * info_.itemsize)};
  }

 private:
  py::buffer_info info_;
};

// A C-contiguous uint8 buffer of ndim dimensions, held while in use (the
// buffer protocol, not NumPy's structures: they differ between NumPy 1 and 2).
py::buffer_info uint8_buffer(const py::buffer& buffer, py::ssize_t ndim, bool writable, const char* what) {
  py::buffer_info info = buffer.request(writable);
  if (info.itemsize != 1 || info.format != "B" || info.ndim != ndim || !is_c_contiguous(info)) {
    throw ArgumentError(std::string("stack_planar: ") + what + " must be a C-contiguous uint8 array of " +
                        std::to_string(ndim) + " dimensions");
  }
  return info;
}

py::array_t<std::uint8_t> rgb_array(Size size) {
  return pooled_rgb_array(static_cast<std::size_t>(size.height), static_cast<std::size_t>(size.width));
}

PixelBox box_of(const std::array<int, 4>& xywh) { return {xywh[0], xywh[1], xywh[2], xywh[3]}; }

class ImageTransform {
 public:
  ImageTransform(imaging::AugmentOptions options, Size output) : options_(options), output_(output) {
    release(std::make_unique<ImageAugmenter>(options_, output_));  // refuses bad sizes now
  }

  // The options' transform, drawn from sample (seed, sequence)'s generator.
  py::array_t<std::uint8_t> augment(const py::buffer& data, std::uint64_t seed, std::uint64_t sequence) {
    EncodedBytes encoded(data);
    auto out = rgb_array(output_);
    std::uint8_t* pixels = out.mutable_data();
    with_augmenter([&](ImageAugmenter& a) {
      auto rng = imaging::sample_rng(seed, sequence);
      a.augment(encoded.bytes(), rng, pixels);
    });
    return out;
  }

  // augment(), and the policy's operations it applied: [(name, magnitude)].
  py::tuple augment_recorded(const py::buffer& data, std::uint64_t seed, std::uint64_t sequence) {
    EncodedBytes encoded(data);
    auto out = rgb_array(output_);
    std::uint8_t* pixels = out.mutable_data();
    std::vector<SampleOp> ops;
    with_augmenter([&](ImageAugmenter& a) {
      auto rng = imaging::sample_rng(seed, sequence);
      a.augment(encoded.bytes(), rng, pixels);
      ops = a.last_geometry().ops;
    });
    py::list recorded;
    for (const SampleOp& op : ops) recorded.append(py::make_tuple(op.name, op.magnitude));
    return py::make_tuple(out, recorded);
  }

  // An explicit transform (get_params' boxes).
  py::array_t<std::uint8_t> render(const py::buffer& data, const std::array<int, 4>& crop,
                                   const std::array<int, 2>& resized, const std::array<int, 4>& window, bool flip) {
    EncodedBytes encoded(data);
    const Transform t{box_of(crop), {resized[0], resized[1]}, box_of(window), flip};
    if (t.window.width <= 0 || t.window.height <= 0) throw ArgumentError("the output window must not be empty");
    auto out = rgb_array(t.output());
    std::uint8_t* pixels = out.mutable_data();
    with_augmenter([&](ImageAugmenter& a) { a.render(encoded.bytes(), t, pixels); });
    return out;
  }

  // Resize(spec) alone: the output is as large as the resized image.
  py::array_t<std::uint8_t> resize(const py::buffer& data) {
    EncodedBytes encoded(data);
    Size size;
    with_augmenter([&](ImageAugmenter& a) { size = a.read_size(encoded.bytes()); });
    const Transform t = imaging::resize_transform(size.width, size.height, options_.resize);
    auto out = rgb_array(t.output());
    std::uint8_t* pixels = out.mutable_data();
    with_augmenter([&](ImageAugmenter& a) { a.render(encoded.bytes(), t, pixels); });
    return out;
  }

  py::array decode(const py::buffer& data) {
    EncodedBytes encoded(data);
    // The array is made once the size is known, on the C++ side of the
    // call: the GIL is taken back just for that.
    py::object out;
    with_augmenter([&](ImageAugmenter& a) {
      (void)a.decode(encoded.bytes(), [&](Size size) {
        py::gil_scoped_acquire gil;
        auto array = rgb_array(size);
        std::uint8_t* pixels = array.mutable_data();
        out = std::move(array);
        return pixels;
      });
    });
    return out;
  }

 private:
  template <typename Work>
  void with_augmenter(Work&& work) {
    std::unique_ptr<ImageAugmenter> augmenter = borrow();
    without_gil([&] { work(*augmenter); });
    release(std::move(augmenter));
  }

  std::unique_ptr<ImageAugmenter> borrow() {
    {
      std::lock_guard lock(mutex_);
      if (!pool_.empty()) {
        auto a = std::move(pool_.back());
        pool_.pop_back();
        return a;
      }
    }
    return std::make_unique<ImageAugmenter>(options_, output_);
  }

  void release(std::unique_ptr<ImageAugmenter> augmenter) {
    std::lock_guard lock(mutex_);
    pool_.push_back(std::move(augmenter));
  }

  imaging::AugmentOptions options_;
  Size output_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<ImageAugmenter>> pool_;  // idle augmenters
};

// images[i] (H, W, C) to out[i] (C, H, W): a batch of HWC images, as the
// transforms make them, collated into the CHW layout torch batches have.
void stack_planar(const std::vector<py::buffer>& images, const py::buffer& out) {
  const py::buffer_info planes = uint8_buffer(out, 4, true, "out");
  const auto n = static_cast<std::size_t>(planes.shape[0]);
  const py::ssize_t channels = planes.shape[1], height = planes.shape[2], width = planes.shape[3];
  if (images.size() != n) {
    throw ArgumentError("stack_planar: " + std::to_string(images.size()) + " images for " + std::to_string(n) +
                        " places");
  }
  std::vector<py::buffer_info> pixels;
  pixels.reserve(n);
  for (const auto& image : images) {
    pixels.push_back(uint8_buffer(image, 3, false, "each image"));
    const auto& shape = pixels.back().shape;
    if (shape[0] != height || shape[1] != width || shape[2] != channels) {
      throw ArgumentError("stack_planar: an image of " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]) +
                          "x" + std::to_string(shape[2]) + " for places of " + std::to_string(height) + "x" +
                          std::to_string(width) + "x" + std::to_string(channels));
    }
  }
  const auto count = static_cast<std::size_t>(height * width);
  auto* to = static_cast<std::uint8_t*>(planes.ptr);
  py::gil_scoped_release unlocked;
  for (std::size_t i = 0; i < n; ++i) {
    imaging::interleaved_to_planar(static_cast<const std::uint8_t*>(pixels[i].ptr), count, static_cast<int>(channels),
                                   to + i * count * channels);
  }
}

std::optional<imaging::Resample> resample_named(const std::string& name) {
  auto r = imaging::parse_resample(name);
  if (!r) throw ArgumentError("interpolation must be 'bilinear', 'bicubic' or 'fast', not '" + name + "'");
  return r;
}

}  // namespace

void bind_imaging(py::module_& m) {
  py::class_<ImageTransform>(m, "ImageTransform",
                             "torchvision's transforms on encoded images (tensorcom.imaging builds these)")
      .def(py::init([](int width, int height, bool validation, std::array<int, 4> resize, std::array<double, 2> scale,
                       std::array<double, 2> ratio, double flip, const std::string& interpolation,
                       std::uint64_t max_pixels, const std::string& policy, int policy_num_ops, int policy_magnitude,
                       int policy_bins, const std::string& policy_interpolation, std::array<int, 3> policy_fill,
                       const std::vector<double>& jitter, double grayscale_probability) {
             imaging::AugmentOptions o;
             o.validation = validation;
             o.resize = {resize[0], resize[1], resize[2], resize[3]};
             o.crop.scale_min = scale[0];
             o.crop.scale_max = scale[1];
             o.crop.ratio_min = ratio[0];
             o.crop.ratio_max = ratio[1];
             o.flip_probability = flip;
             o.resample = *resample_named(interpolation);
             o.max_pixels = max_pixels;
             if (!policy.empty()) {
               o.auto_augment = policy_options(policy, policy_num_ops, policy_magnitude, policy_bins,
                                               policy_interpolation, policy_fill);
             }
             o.color_jitter = jitter_options(jitter);
             if (!(grayscale_probability >= 0 && grayscale_probability <= 1)) {
               throw ArgumentError("RandomGrayscale: p must be a probability from 0 to 1");
             }
             o.grayscale_probability = grayscale_probability;
             return std::make_unique<ImageTransform>(o, Size{width, height});
           }),
           py::arg("width"), py::arg("height"), py::arg("validation"), py::arg("resize"), py::arg("scale"),
           py::arg("ratio"), py::arg("flip"), py::arg("interpolation"), py::arg("max_pixels"), py::arg("policy") = "",
           py::arg("policy_num_ops") = 2, py::arg("policy_magnitude") = 9, py::arg("policy_bins") = 31,
           py::arg("policy_interpolation") = "nearest", py::arg("policy_fill") = std::array<int, 3>{0, 0, 0},
           py::arg("jitter") = std::vector<double>{}, py::arg("grayscale_probability") = 0.0)
      .def("augment", &ImageTransform::augment, py::arg("data"), py::arg("seed"), py::arg("sequence"))
      .def("augment_recorded", &ImageTransform::augment_recorded, py::arg("data"), py::arg("seed"), py::arg("sequence"))
      .def("render", &ImageTransform::render, py::arg("data"), py::arg("crop"), py::arg("resized"), py::arg("window"),
           py::arg("flip"))
      .def("resize", &ImageTransform::resize, py::arg("data"))
      .def("decode", &ImageTransform::decode, py::arg("data"));

  m.def("pooled_idle_bytes", &pooled_idle_bytes, "bytes of freed output arrays kept for the next ones");
  m.def("stack_planar", &stack_planar, py::arg("images"), py::arg("out"),
        "uint8 (H, W, C) images into out, a uint8 (N, C, H, W) array, with the GIL released");
  m.def(
      "image_size",
      [](const py::buffer& data) {
        EncodedBytes encoded(data);
        const auto size = imaging::peek_image_size(encoded.bytes());
        if (!size) {
          throw imaging::ImageError(imaging::Problem::kUndecodable, "not a JPEG, PNG, PNM, BMP or WebP header");
        }
        return std::pair<std::uint64_t, std::uint64_t>(size->width, size->height);
      },
      py::arg("data"), "(width, height) from the image's header, without decoding");
  m.def(
      "image_format",
      [](const py::buffer& data) {
        EncodedBytes encoded(data);
        return std::string(imaging::format_name(imaging::sniff_format(encoded.bytes())));
      },
      py::arg("data"), "the format the image's first bytes name: jpeg, png, pnm, bmp, webp or unknown");
  m.def(
      "random_resized_crop",
      [](int width, int height, std::array<double, 2> scale, std::array<double, 2> ratio, std::uint64_t seed,
         std::uint64_t sequence) {
        if (width <= 0 || height <= 0) throw ArgumentError("image size must be positive");
        imaging::RandomResizedCropOptions o;
        o.scale_min = scale[0];
        o.scale_max = scale[1];
        o.ratio_min = ratio[0];
        o.ratio_max = ratio[1];
        auto rng = imaging::sample_rng(seed, sequence);
        const PixelBox b = imaging::random_resized_crop(width, height, o, rng);
        return std::array<int, 4>{b.x, b.y, b.width, b.height};
      },
      py::arg("width"), py::arg("height"), py::arg("scale"), py::arg("ratio"), py::arg("seed"), py::arg("sequence"),
      "RandomResizedCrop's box (x, y, width, height), drawn from sample (seed, sequence)'s generator");
  m.def(
      "resized_size",
      [](int width, int height, std::array<int, 4> resize) {
        if (width <= 0 || height <= 0) throw ArgumentError("image size must be positive");
        const Size s = imaging::resized_size(width, height, {resize[0], resize[1], resize[2], resize[3]});
        return std::array<int, 2>{s.width, s.height};
      },
      py::arg("width"), py::arg("height"), py::arg("resize"), "what Resize makes of a width x height image");
  m.def(
      "center_crop",
      [](int width, int height, int crop_width, int crop_height) {
        const PixelBox b = imaging::center_crop(width, height, {crop_width, crop_height});
        return std::array<int, 4>{b.x, b.y, b.width, b.height};
      },
      py::arg("width"), py::arg("height"), py::arg("crop_width"), py::arg("crop_height"),
      "where CenterCrop cuts a width x height image (x, y, width, height); negative x, y when it is larger");
}

}  // namespace tensorcom::python
