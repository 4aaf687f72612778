// MixUp and CutMix (tensorcom/imaging/batch_mix.h) on NumPy batches, in
// place, with the GIL released: tensorcom.imaging's batch transforms and
// the trainer's soft targets for batches the servers mixed.
#include "tensorcom/imaging/batch_mix.h"

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "tensorcom/imaging/sample_rng.h"

namespace tensorcom::python {

namespace {

using imaging::MixBox;
using imaging::MixKind;
using imaging::SampleMix;
// (kind, partner, lambda, (x0, y0, x1, y1)) as Python sees one sample's mix.
using MixRecord = std::tuple<std::string, std::int32_t, double, std::array<std::int32_t, 4>>;

std::string kind_name(MixKind kind) {
  switch (kind) {
    case MixKind::kMixUp: return "mixup";
    case MixKind::kCutMix: return "cutmix";
    case MixKind::kNone: break;
  }
  return "none";
}

MixKind parse_kind(const std::string& name) {
  if (name == "mixup") return MixKind::kMixUp;
  if (name == "cutmix") return MixKind::kCutMix;
  if (name == "none") return MixKind::kNone;
  throw ArgumentError("a mix's kind is mixup, cutmix or none, not '" + name + "'");
}

MixRecord to_record(const SampleMix& m) {
  return {kind_name(m.kind), m.partner, m.lambda, {m.box.x0, m.box.y0, m.box.x1, m.box.y1}};
}

std::vector<SampleMix> from_records(const std::vector<MixRecord>& records) {
  std::vector<SampleMix> mixes;
  mixes.reserve(records.size());
  for (const auto& [kind, partner, lambda, box] : records) {
    mixes.push_back({parse_kind(kind), partner, lambda, MixBox{box[0], box[1], box[2], box[3]}});
  }
  return mixes;
}

std::vector<MixRecord> batch_mix_draw(const std::string& mode, double mixup_alpha, double cutmix_alpha,
                                      std::optional<std::array<double, 2>> cutmix_minmax, double prob,
                                      double switch_prob, bool correct_lam, std::size_t count, int height, int width,
                                      std::uint64_t seed, std::uint64_t sequence) {
  imaging::MixOptions o;
  const auto parsed = imaging::parse_mix_mode(mode);
  if (!parsed) throw ArgumentError("mode must be torchvision, batch, pair or elem, not '" + mode + "'");
  o.mode = *parsed;
  o.mixup_alpha = mixup_alpha;
  o.cutmix_alpha = cutmix_alpha;
  o.cutmix_minmax = cutmix_minmax;
  o.probability = prob;
  o.switch_probability = switch_prob;
  o.correct_lambda = correct_lam;
  auto rng = imaging::sample_rng(seed, sequence);
  std::vector<MixRecord> out;
  for (const SampleMix& m : imaging::draw_batch_mix(o, count, height, width, rng)) out.push_back(to_record(m));
  return out;
}

imaging::MixPixels pixels_of(const py::buffer_info& info) {
  if (info.format == "B" && info.itemsize == 1) return imaging::MixPixels::kUInt8;
  if (info.format == "f" && info.itemsize == 4) return imaging::MixPixels::kFloat32;
  if (info.format == "e" && info.itemsize == 2) return imaging::MixPixels::kFloat16;
  throw ArgumentError("the images must be uint8, float32 or float16, not format '" + info.format + "'");
}

bool c_contiguous(const py::buffer_info& info) {
  py::ssize_t expected = info.itemsize;
  for (auto d = info.ndim; d-- > 0;) {
    if (info.shape[static_cast<std::size_t>(d)] > 1 && info.strides[static_cast<std::size_t>(d)] != expected) {
      return false;
    }
    expected *= info.shape[static_cast<std::size_t>(d)];
  }
  return true;
}

void batch_mix_apply(const py::buffer& images, const std::vector<MixRecord>& records, bool channels_last) {
  py::buffer_info info;
  try {
    info = images.request(true);
  } catch (const py::error_already_set&) {
    throw ArgumentError("the images must be a writable C-contiguous array");
  }
  if (info.ndim != 4 || !c_contiguous(info)) {
    throw ArgumentError("the images must be a writable C-contiguous 4-d array (N, C, H, W) or (N, H, W, C)");
  }
  imaging::BatchPixels batch;
  batch.data = info.ptr;
  batch.pixels = pixels_of(info);
  batch.count = static_cast<std::size_t>(info.shape[0]);
  batch.channels_last = channels_last;
  batch.height = static_cast<int>(info.shape[channels_last ? 1 : 2]);
  batch.width = static_cast<int>(info.shape[channels_last ? 2 : 3]);
  batch.channels = static_cast<int>(info.shape[channels_last ? 3 : 1]);
  const std::vector<SampleMix> mixes = from_records(records);
  const py::gil_scoped_release release;
  imaging::mix_batch(mixes, batch);
}

py::array_t<float> batch_mix_targets(const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& labels,
                                     const std::vector<MixRecord>& records, int num_classes, double smoothing) {
  if (labels.ndim() != 1) throw ArgumentError("the labels must be one-dimensional (N,)");
  const std::vector<SampleMix> mixes = from_records(records);
  if (num_classes <= 0) throw ArgumentError("num_classes must be positive, not " + std::to_string(num_classes));
  const auto n = static_cast<py::ssize_t>(labels.shape(0));
  py::array_t<float> out({n, static_cast<py::ssize_t>(num_classes)});
  imaging::mix_targets(mixes, std::span(labels.data(), static_cast<std::size_t>(n)), num_classes, smoothing,
                       std::span(out.mutable_data(), static_cast<std::size_t>(out.size())));
  return out;
}

}  // namespace

void bind_batch_mix(py::module_& m) {
  m.def("batch_mix_draw", &batch_mix_draw, py::arg("mode"), py::arg("mixup_alpha"), py::arg("cutmix_alpha"),
        py::arg("cutmix_minmax"), py::arg("prob"), py::arg("switch_prob"), py::arg("correct_lam"), py::arg("count"),
        py::arg("height"), py::arg("width"), py::arg("seed"), py::arg("sequence"),
        "MixUp/CutMix's draw for batch (seed, sequence): [(kind, partner, lambda, (x0, y0, x1, y1))] a sample");
  m.def("batch_mix_apply", &batch_mix_apply, py::arg("images"), py::arg("mixes"), py::arg("channels_last"),
        "mixes a uint8, float32 or float16 batch in place as drawn");
  m.def("batch_mix_targets", &batch_mix_targets, py::arg("labels"), py::arg("mixes"), py::arg("num_classes"),
        py::arg("label_smoothing") = 0.0, "the soft targets, float32 (N, num_classes), of a mixed batch");
}

}  // namespace tensorcom::python
