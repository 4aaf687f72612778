// MixUp and CutMix over a batch, as torchvision's transforms.v2 and timm's
// Mixup apply them: each sample is mixed with a partner of the same batch
// (torchvision: the batch rolled by one; timm: the batch reversed) with a
// weight lambda drawn from Beta(alpha, alpha), CutMix pasting a box of the
// partner and setting lambda to the share of the image left.
//
// The draw (draw_batch_mix) is separate from the pixels (mix_batch) and the
// targets (mix_targets): servers draw and mix, send each sample's (label,
// partner, lambda), and the trainer makes the soft targets, num_classes
// floats a sample, on its side. Given the same draws the pixels are
// torchvision's and timm's: float32 batches bit for bit, uint8 batches as
// timm's collate rounds them (to nearest, ties to even).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string_view>
#include <vector>

namespace tensorcom::imaging {

// Who draws, and how samples pair.
enum class MixMode {
  kTorchvision,  // v2.RandomChoice([MixUp, CutMix]): one draw a batch, partner i - 1
  kBatch,        // timm mode='batch': one draw a batch, partner n - 1 - i
  kPair,         // timm mode='pair': one draw per pair (i, n - 1 - i), both mixed
  kElem,         // timm mode='elem': one draw per sample, partner n - 1 - i
};

// "torchvision", "batch", "pair" or "elem"; nothing otherwise.
[[nodiscard]] std::optional<MixMode> parse_mix_mode(std::string_view name) noexcept;
[[nodiscard]] std::string_view mix_mode_name(MixMode mode) noexcept;

struct MixOptions {
  MixMode mode = MixMode::kTorchvision;
  double mixup_alpha = 0;   // > 0: MixUp is drawn
  double cutmix_alpha = 0;  // > 0: CutMix is drawn
  // timm's cutmix_minmax: the box's sides as shares of the image's, drawn
  // in [min, max) (and cutmix_alpha taken as 1).
  std::optional<std::array<double, 2>> cutmix_minmax;
  double probability = 1;           // timm's prob: a batch, pair or sample is mixed
  double switch_probability = 0.5;  // CutMix rather than MixUp when both are on (torchvision: 0.5)
  bool correct_lambda = true;       // timm's correct_lam: lambda from the box clipped to the image
};

// Throws ArgumentError naming what is wrong: alphas negative or not finite,
// neither on, probabilities outside [0, 1], a minmax outside (0, 1] or
// with min > max.
void check_mix_options(const MixOptions& options);

enum class MixKind : std::uint8_t { kNone, kMixUp, kCutMix };

// [x0, x1) x [y0, y1) of the image, taken from the partner.
struct MixBox {
  std::int32_t x0 = 0;
  std::int32_t y0 = 0;
  std::int32_t x1 = 0;
  std::int32_t y1 = 0;

  bool operator==(const MixBox&) const = default;
};

// What one sample of the batch became: lambda of itself and 1 - lambda of
// its partner (pixels for MixUp, area for CutMix; targets for both).
struct SampleMix {
  MixKind kind = MixKind::kNone;
  std::int32_t partner = 0;  // index in the batch
  double lambda = 1;         // held as float32 where timm holds it so (pair, elem)
  MixBox box;                // CutMix only

  bool operator==(const SampleMix&) const = default;
};

// One draw for a batch of count images of height x height pixels. timm's
// modes need an even count (as timm asserts); ArgumentError otherwise.
[[nodiscard]] std::vector<SampleMix> draw_batch_mix(const MixOptions& options, std::size_t count, int height, int width,
                                                    std::mt19937_64& rng);

// A batch in memory: count images of height x width x channels, channels
// last (HWC) or first (CHW), as uint8, float32 or float16 (IEEE half, bits).
enum class MixPixels { kUInt8, kFloat32, kFloat16 };

struct BatchPixels {
  void* data = nullptr;
  MixPixels pixels = MixPixels::kUInt8;
  std::size_t count = 0;
  int height = 0;
  int width = 0;
  int channels = 3;
  bool channels_last = true;
};

// Mixes the batch in place as `mixes` say (one per image); uint8 rounds to
// nearest (ties to even), float16 is mixed in float32 and rounded to half.
// Needs memory for one copy of the images mixed. Throws ArgumentError if a
// mix does not fit the batch (count, partner, box).
void mix_batch(std::span<const SampleMix> mixes, const BatchPixels& batch);

// The soft targets, float32 (count, num_classes): one-hot rows (smoothed:
// off = smoothing / num_classes, on = 1 - smoothing + off, as timm's
// mixup_target) of each label and its partner's, weighted lambda and
// 1 - lambda as torchvision and timm compute them. Throws ArgumentError for
// a label outside [0, num_classes) or a partner outside the batch.
void mix_targets(std::span<const SampleMix> mixes, std::span<const std::int64_t> labels, int num_classes,
                 double smoothing, std::span<float> out);

}  // namespace tensorcom::imaging
