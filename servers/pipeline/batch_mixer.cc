#include "batch_mixer.h"

#include <vector>

#include "resume_token.h"
#include "tensorcom/imaging/sample_rng.h"

namespace tensorcom::pipeline {

namespace {

// Apart from the samples' streams under the same seed.
constexpr std::uint64_t kMixStream = 0x6d69787570637574;  // "mixupcut"

imaging::MixPixels pixels_of(DType dtype) {
  if (dtype == DType::kFloat32) return imaging::MixPixels::kFloat32;
  if (dtype == DType::kFloat16) return imaging::MixPixels::kFloat16;
  return imaging::MixPixels::kUInt8;
}

double kind_code(imaging::MixKind kind) { return static_cast<double>(static_cast<int>(kind)); }

}  // namespace

BatchMixer::BatchMixer(imaging::MixOptions options, std::uint64_t seed, std::string_view stream)
    : options_(options), seed_(seed ^ kMixStream ^ fnv1a(stream)) {
  imaging::check_mix_options(options_);
}

Tensor BatchMixer::mix(AssembledBatch& batch, bool channels_last) const {
  const auto n = static_cast<std::size_t>(batch.images.dim(0));
  const int size = batch.size;
  // Batch b of epoch e: epochs stay apart up to 2^40 batches each.
  auto rng = imaging::sample_rng(seed_, (batch.place.epoch << 40) + batch.place.index);
  const bool odd_for_timm = options_.mode != imaging::MixMode::kTorchvision && n % 2 != 0;
  const std::size_t mixed = odd_for_timm ? n - 1 : n;
  std::vector<imaging::SampleMix> mixes = imaging::draw_batch_mix(options_, mixed, size, size, rng);
  mixes.resize(n, imaging::SampleMix{imaging::MixKind::kNone, static_cast<std::int32_t>(n - 1), 1.0, {}});
  imaging::BatchPixels pixels{batch.images.data(), pixels_of(batch.images.dtype()), n, size, size, 3, channels_last};
  imaging::mix_batch(mixes, pixels);

  Tensor draws = Tensor::allocate(DType::kFloat64, {static_cast<std::int64_t>(n), 7}, kMixInfo);
  auto* out = reinterpret_cast<double*>(draws.data());
  for (const imaging::SampleMix& m : mixes) {
    const double row[7] = {kind_code(m.kind),
                           static_cast<double>(m.partner),
                           m.lambda,
                           static_cast<double>(m.box.x0),
                           static_cast<double>(m.box.y0),
                           static_cast<double>(m.box.x1),
                           static_cast<double>(m.box.y1)};
    for (double v : row) *out++ = v;
  }
  return draws;
}

}  // namespace tensorcom::pipeline
