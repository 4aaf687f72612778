// torchvision's automatic augmentation policies (transforms.autoaugment,
// v1): TrivialAugmentWide, RandAugment and AutoAugment's ImageNet policy.
// The same operations, magnitude bins (torch's float32 linspace values),
// signs and probabilities, drawn from a sample's generator instead of
// torch's; each operation applied with Pillow's arithmetic (color_ops.h,
// geometric_ops.h), so that the ops drawn, re-applied with torchvision's
// functional API to a PIL image of the same crop, give the same pixels.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorcom/imaging/geometric_ops.h"

namespace tensorcom::imaging {

// The operations, named as torchvision's _apply_op names them.
enum class AugmentOp : std::uint8_t {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
  // torchvision.transforms.functional's calls, the magnitude their argument
  // (ColorJitter's factors, RandomGrayscale's 3 output channels).
  kAdjustBrightness,
  kAdjustContrast,
  kAdjustSaturation,
  kAdjustHue,
  kAdjustSharpness,
  kRgbToGrayscale,
  // timm's operation functions, the magnitude their argument, resampled as
  // AppliedOp::interpolation says: rotate(degrees), shear_x/_y(factor),
  // translate_x/_y (pixels, not rounded), solarize_add(add, thresh 128).
  kTimmRotate,
  kTimmShearX,
  kTimmShearY,
  kTimmTranslateX,
  kTimmTranslateY,
  kTimmSolarizeAdd,
};

[[nodiscard]] std::string_view augment_op_name(AugmentOp op) noexcept;

// One operation as drawn: what torchvision's _apply_op(img, op, magnitude)
// is called with (the magnitude signed, 0 for operations without one).
struct AppliedOp {
  AugmentOp op = AugmentOp::kIdentity;
  double magnitude = 0;
  // timm's geometric operations: the filter this call chose.
  PolicyInterpolation interpolation = PolicyInterpolation::kNearest;

  bool operator==(const AppliedOp&) const = default;
};

// The name recorded in metadata: augment_op_name, and for timm's geometric
// operations ":bilinear" or ":bicubic" after it.
[[nodiscard]] std::string recorded_op_name(const AppliedOp& op);
// The operation a recorded name names (the filter set for timm's); throws
// ArgumentError for a name it does not know.
[[nodiscard]] AppliedOp op_from_record(std::string_view name, double magnitude);

// timm's RandAugment config (timm_augment.h parses and draws it).
struct TimmRandAugmentOptions {
  int magnitude = 10;        // m
  int num_layers = 2;        // n
  double probability = 0.5;  // p
  double magnitude_std = 0;  // mstd (infinity: uniform in [0, m])
  int magnitude_max = 0;     // mmax (0: 10)
  bool increasing = false;   // inc
};

enum class PolicyKind { kTrivialAugmentWide, kRandAugment, kAutoAugmentImageNet, kTimmRandAugment };

struct AutoAugmentOptions {
  PolicyKind kind = PolicyKind::kTrivialAugmentWide;
  int num_ops = 2;                        // RandAugment: operations an image
  int magnitude = 9;                      // RandAugment: the bin every operation takes
  int num_magnitude_bins = 31;            // TrivialAugmentWide and RandAugment
  GeometricOptions geometric;             // interpolation and fill of the geometric operations
  std::string timm_config;                // kTimmRandAugment: timm's string, "rand-m9-mstd0.5-inc1"
  bool timm_random_interpolation = true;  // kTimmRandAugment: each call bilinear or bicubic
};

// "ta_wide", "ra" or "imagenet" (torchvision's reference scripts'
// --auto-augment names), or a timm string "rand-..." (kTimmRandAugment);
// throws ArgumentError naming the others.
[[nodiscard]] PolicyKind parse_policy_kind(std::string_view name);

class AutoAugmentPolicy {
 public:
  // Throws ArgumentError for arguments torchvision would refuse or
  // misbehave on (a magnitude outside the bins, no bins, no operations).
  explicit AutoAugmentPolicy(AutoAugmentOptions options);

  // The operations for a width x height image (RandAugment's translations
  // scale with the size), drawn from rng.
  [[nodiscard]] std::vector<AppliedOp> draw(int width, int height, std::mt19937_64& rng) const;
  [[nodiscard]] const AutoAugmentOptions& options() const noexcept { return options_; }

 private:
  AutoAugmentOptions options_;
  TimmRandAugmentOptions timm_;  // kTimmRandAugment's parsed string
};

// Applies drawn operations in order, in place.
void apply_ops(std::span<const AppliedOp> ops, RgbImage image, const GeometricOptions& options,
               std::vector<std::uint8_t>& scratch);

// Element i of torch.linspace(start, end, steps) in float32 as torch's CPU
// kernel computes it (vectors of eight from the start, then fused
// multiply-adds): the policies' magnitude bins are these values.
[[nodiscard]] float torch_linspace_at(double start, double end, int steps, int i);

}  // namespace tensorcom::imaging
