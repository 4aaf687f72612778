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
  kRgbToGrayscale,
};

[[nodiscard]] std::string_view augment_op_name(AugmentOp op) noexcept;

// One operation as drawn: what torchvision's _apply_op(img, op, magnitude)
// is called with (the magnitude signed, 0 for operations without one).
struct AppliedOp {
  AugmentOp op = AugmentOp::kIdentity;
  double magnitude = 0;

  bool operator==(const AppliedOp&) const = default;
};

enum class PolicyKind { kTrivialAugmentWide, kRandAugment, kAutoAugmentImageNet };

struct AutoAugmentOptions {
  PolicyKind kind = PolicyKind::kTrivialAugmentWide;
  int num_ops = 2;              // RandAugment: operations an image
  int magnitude = 9;            // RandAugment: the bin every operation takes
  int num_magnitude_bins = 31;  // TrivialAugmentWide and RandAugment
  GeometricOptions geometric;   // interpolation and fill of the geometric operations
};

// "ta_wide", "ra" or "imagenet" (torchvision's reference scripts'
// --auto-augment names); throws ArgumentError naming the others.
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
};

// Applies drawn operations in order, in place.
void apply_ops(std::span<const AppliedOp> ops, RgbImage image, const GeometricOptions& options,
               std::vector<std::uint8_t>& scratch);

// Element i of torch.linspace(start, end, steps) in float32 as torch's CPU
// kernel computes it (vectors of eight from the start, then fused
// multiply-adds): the policies' magnitude bins are these values.
[[nodiscard]] float torch_linspace_at(double start, double end, int steps, int i);

}  // namespace tensorcom::imaging
