#include "tensorcom/imaging/auto_augment.h"

#include <array>
#include <cmath>
#include <utility>

#include "tensorcom/codec/error.h"
#include "tensorcom/imaging/timm_augment.h"

namespace tensorcom::imaging {

namespace {

// The operations of TrivialAugmentWide's and RandAugment's augmentation
// spaces, in their dictionaries' order: a draw picks an index into this.
constexpr std::array<AugmentOp, 14> kSpaceOps = {
    AugmentOp::kIdentity,     AugmentOp::kShearX,    AugmentOp::kShearY,     AugmentOp::kTranslateX,
    AugmentOp::kTranslateY,   AugmentOp::kRotate,    AugmentOp::kBrightness, AugmentOp::kColor,
    AugmentOp::kContrast,     AugmentOp::kSharpness, AugmentOp::kPosterize,  AugmentOp::kSolarize,
    AugmentOp::kAutoContrast, AugmentOp::kEqualize,
};

// One half of an AutoAugment sub-policy: the operation, its probability
// and its magnitude bin (-1: none).
struct PolicyStep {
  AugmentOp op;
  double probability;
  int bin;
};

using SubPolicy = std::array<PolicyStep, 2>;

// torchvision's AutoAugmentPolicy.IMAGENET.
constexpr std::array<SubPolicy, 25> kImageNetPolicy = {{
    {{{AugmentOp::kPosterize, 0.4, 8}, {AugmentOp::kRotate, 0.6, 9}}},
    {{{AugmentOp::kSolarize, 0.6, 5}, {AugmentOp::kAutoContrast, 0.6, -1}}},
    {{{AugmentOp::kEqualize, 0.8, -1}, {AugmentOp::kEqualize, 0.6, -1}}},
    {{{AugmentOp::kPosterize, 0.6, 7}, {AugmentOp::kPosterize, 0.6, 6}}},
    {{{AugmentOp::kEqualize, 0.4, -1}, {AugmentOp::kSolarize, 0.2, 4}}},
    {{{AugmentOp::kEqualize, 0.4, -1}, {AugmentOp::kRotate, 0.8, 8}}},
    {{{AugmentOp::kSolarize, 0.6, 3}, {AugmentOp::kEqualize, 0.6, -1}}},
    {{{AugmentOp::kPosterize, 0.8, 5}, {AugmentOp::kEqualize, 1.0, -1}}},
    {{{AugmentOp::kRotate, 0.2, 3}, {AugmentOp::kSolarize, 0.6, 8}}},
    {{{AugmentOp::kEqualize, 0.6, -1}, {AugmentOp::kPosterize, 0.4, 6}}},
    {{{AugmentOp::kRotate, 0.8, 8}, {AugmentOp::kColor, 0.4, 0}}},
    {{{AugmentOp::kRotate, 0.4, 9}, {AugmentOp::kEqualize, 0.6, -1}}},
    {{{AugmentOp::kEqualize, 0.0, -1}, {AugmentOp::kEqualize, 0.8, -1}}},
    {{{AugmentOp::kInvert, 0.6, -1}, {AugmentOp::kEqualize, 1.0, -1}}},
    {{{AugmentOp::kColor, 0.6, 4}, {AugmentOp::kContrast, 1.0, 8}}},
    {{{AugmentOp::kRotate, 0.8, 8}, {AugmentOp::kColor, 1.0, 2}}},
    {{{AugmentOp::kColor, 0.8, 8}, {AugmentOp::kSolarize, 0.8, 7}}},
    {{{AugmentOp::kSharpness, 0.4, 7}, {AugmentOp::kInvert, 0.6, -1}}},
    {{{AugmentOp::kShearX, 0.6, 5}, {AugmentOp::kEqualize, 1.0, -1}}},
    {{{AugmentOp::kColor, 0.4, 0}, {AugmentOp::kEqualize, 0.6, -1}}},
    {{{AugmentOp::kEqualize, 0.4, -1}, {AugmentOp::kSolarize, 0.2, 4}}},
    {{{AugmentOp::kSolarize, 0.6, 5}, {AugmentOp::kAutoContrast, 0.6, -1}}},
    {{{AugmentOp::kInvert, 0.6, -1}, {AugmentOp::kEqualize, 1.0, -1}}},
    {{{AugmentOp::kColor, 0.6, 4}, {AugmentOp::kContrast, 1.0, 8}}},
    {{{AugmentOp::kEqualize, 0.8, -1}, {AugmentOp::kEqualize, 0.6, -1}}},
}};

// Operations whose magnitude takes a random sign.
bool signed_op(AugmentOp op) noexcept {
  switch (op) {
    case AugmentOp::kShearX:
    case AugmentOp::kShearY:
    case AugmentOp::kTranslateX:
    case AugmentOp::kTranslateY:
    case AugmentOp::kRotate:
    case AugmentOp::kBrightness:
    case AugmentOp::kColor:
    case AugmentOp::kContrast:
    case AugmentOp::kSharpness: return true;
    default: return false;
  }
}

// Operations with magnitude bins (the others' magnitude is a scalar 0).
bool binned_op(AugmentOp op) noexcept {
  return op != AugmentOp::kIdentity && op != AugmentOp::kAutoContrast && op != AugmentOp::kEqualize &&
         op != AugmentOp::kInvert;
}

// The magnitude bins' ends: TrivialAugmentWide's wide ranges, or
// RandAugment's (which AutoAugment shares) with translations in
// proportion to the image.
struct Ranges {
  double shear, translate_x, translate_y, rotate, enhance;
  double posterize_divisions;  // posterize: 8 - round(bin / ((bins - 1) / this))
};

Ranges ranges_for(PolicyKind kind, int width, int height) {
  if (kind == PolicyKind::kTrivialAugmentWide) return {0.99, 32.0, 32.0, 135.0, 0.99, 6.0};
  return {0.3, 150.0 / 331.0 * width, 150.0 / 331.0 * height, 30.0, 0.9, 4.0};
}

// Bin `bin` of `bins` of an operation's magnitudes, as torch computes the
// table (float32), widened to double as .item() gives it.
double bin_magnitude(AugmentOp op, const Ranges& r, int bins, int bin) {
  switch (op) {
    case AugmentOp::kShearX:
    case AugmentOp::kShearY: return torch_linspace_at(0.0, r.shear, bins, bin);
    case AugmentOp::kTranslateX: return torch_linspace_at(0.0, r.translate_x, bins, bin);
    case AugmentOp::kTranslateY: return torch_linspace_at(0.0, r.translate_y, bins, bin);
    case AugmentOp::kRotate: return torch_linspace_at(0.0, r.rotate, bins, bin);
    case AugmentOp::kBrightness:
    case AugmentOp::kColor:
    case AugmentOp::kContrast:
    case AugmentOp::kSharpness: return torch_linspace_at(0.0, r.enhance, bins, bin);
    case AugmentOp::kPosterize: {
      // arange(bins) / ((bins - 1) / d) in float32, rounded half to even.
      const float divisor = static_cast<float>((bins - 1) / r.posterize_divisions);
      return 8 - static_cast<int>(std::nearbyint(static_cast<float>(bin) / divisor));
    }
    case AugmentOp::kSolarize: return torch_linspace_at(255.0, 0.0, bins, bin);
    default: return 0.0;
  }
}

int draw_below(std::mt19937_64& rng, int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }

// A space operation with its magnitude from `bin` and a random sign.
AppliedOp space_op(AugmentOp op, const Ranges& r, int bins, int bin, std::mt19937_64& rng) {
  AppliedOp applied{op, binned_op(op) ? bin_magnitude(op, r, bins, bin) : 0.0};
  if (signed_op(op) && draw_below(rng, 2) == 1) applied.magnitude *= -1.0;
  return applied;
}

void draw_trivial_augment(const AutoAugmentOptions& o, std::mt19937_64& rng, std::vector<AppliedOp>& out) {
  const AugmentOp op = kSpaceOps[static_cast<std::size_t>(draw_below(rng, static_cast<int>(kSpaceOps.size())))];
  const Ranges r = ranges_for(o.kind, 0, 0);
  const int bin = binned_op(op) ? draw_below(rng, o.num_magnitude_bins) : 0;
  out.push_back(space_op(op, r, o.num_magnitude_bins, bin, rng));
}

void draw_rand_augment(const AutoAugmentOptions& o, int width, int height, std::mt19937_64& rng,
                       std::vector<AppliedOp>& out) {
  const Ranges r = ranges_for(o.kind, width, height);
  for (int i = 0; i < o.num_ops; ++i) {
    const AugmentOp op = kSpaceOps[static_cast<std::size_t>(draw_below(rng, static_cast<int>(kSpaceOps.size())))];
    out.push_back(space_op(op, r, o.num_magnitude_bins, o.magnitude, rng));
  }
}

void draw_auto_augment(int width, int height, std::mt19937_64& rng, std::vector<AppliedOp>& out) {
  constexpr int kBins = 10;
  const Ranges r = ranges_for(PolicyKind::kAutoAugmentImageNet, width, height);
  const SubPolicy& policy =
      kImageNetPolicy[static_cast<std::size_t>(draw_below(rng, static_cast<int>(kImageNetPolicy.size())))];
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::array<double, 2> probabilities{unit(rng), unit(rng)};
  const std::array<int, 2> signs{draw_below(rng, 2), draw_below(rng, 2)};
  for (std::size_t i = 0; i < policy.size(); ++i) {
    const PolicyStep& step = policy[i];
    if (!(probabilities[i] <= step.probability)) continue;
    AppliedOp applied{step.op, step.bin >= 0 ? bin_magnitude(step.op, r, kBins, step.bin) : 0.0};
    if (signed_op(step.op) && signs[i] == 0) applied.magnitude *= -1.0;
    out.push_back(applied);
  }
}

// int(magnitude) as torchvision and timm take it, kept to what the
// operation can use (a recorded magnitude may come from anywhere).
int whole_within(double magnitude, int low, int high) {
  if (!(magnitude > low)) return low;
  if (magnitude >= high) return high;
  return static_cast<int>(magnitude);
}

void apply_op(const AppliedOp& a, RgbImage image, const GeometricOptions& options, std::vector<std::uint8_t>& scratch) {
  switch (a.op) {
    case AugmentOp::kIdentity: return;
    case AugmentOp::kShearX: return shear_x(image, a.magnitude, options, scratch);
    case AugmentOp::kShearY: return shear_y(image, a.magnitude, options, scratch);
    case AugmentOp::kTranslateX: return translate_x(image, a.magnitude, options, scratch);
    case AugmentOp::kTranslateY: return translate_y(image, a.magnitude, options, scratch);
    case AugmentOp::kRotate: return rotate(image, a.magnitude, options, scratch);
    case AugmentOp::kBrightness: return adjust_brightness(image, 1.0 + a.magnitude);
    case AugmentOp::kColor: return adjust_saturation(image, 1.0 + a.magnitude);
    case AugmentOp::kContrast: return adjust_contrast(image, 1.0 + a.magnitude);
    case AugmentOp::kSharpness: return adjust_sharpness(image, 1.0 + a.magnitude);
    case AugmentOp::kPosterize: return posterize(image, whole_within(a.magnitude, 0, 8));  // 8 and up: unchanged
    case AugmentOp::kSolarize: return solarize(image, a.magnitude);
    case AugmentOp::kAutoContrast: return autocontrast(image);
    case AugmentOp::kEqualize: return equalize(image);
    case AugmentOp::kInvert: return invert(image);
    case AugmentOp::kAdjustBrightness: return adjust_brightness(image, a.magnitude);
    case AugmentOp::kAdjustContrast: return adjust_contrast(image, a.magnitude);
    case AugmentOp::kAdjustSaturation: return adjust_saturation(image, a.magnitude);
    case AugmentOp::kAdjustHue: return adjust_hue(image, a.magnitude);
    case AugmentOp::kAdjustSharpness: return adjust_sharpness(image, a.magnitude);
    case AugmentOp::kRgbToGrayscale: return to_grayscale(image);
    case AugmentOp::kTimmRotate: return rotate(image, a.magnitude, {a.interpolation, options.fill}, scratch);
    case AugmentOp::kTimmShearX:
      return pil_affine(image, {1, a.magnitude, 0, 0, 1, 0}, {a.interpolation, options.fill}, scratch);
    case AugmentOp::kTimmShearY:
      return pil_affine(image, {1, 0, 0, a.magnitude, 1, 0}, {a.interpolation, options.fill}, scratch);
    case AugmentOp::kTimmTranslateX:
      return pil_affine(image, {1, 0, a.magnitude, 0, 1, 0}, {a.interpolation, options.fill}, scratch);
    case AugmentOp::kTimmTranslateY:
      return pil_affine(image, {1, 0, 0, 0, 1, a.magnitude}, {a.interpolation, options.fill}, scratch);
    case AugmentOp::kTimmSolarizeAdd: return solarize_add(image, whole_within(a.magnitude, 0, 255), 128);
  }
}

bool timm_geometric(AugmentOp op) noexcept {
  return op == AugmentOp::kTimmRotate || op == AugmentOp::kTimmShearX || op == AugmentOp::kTimmShearY ||
         op == AugmentOp::kTimmTranslateX || op == AugmentOp::kTimmTranslateY;
}

std::string_view interpolation_name(PolicyInterpolation i) noexcept {
  switch (i) {
    case PolicyInterpolation::kNearest: return "nearest";
    case PolicyInterpolation::kBilinear: return "bilinear";
    case PolicyInterpolation::kBicubic: return "bicubic";
  }
  return "nearest";
}

}  // namespace

std::string_view augment_op_name(AugmentOp op) noexcept {
  switch (op) {
    case AugmentOp::kIdentity: return "Identity";
    case AugmentOp::kShearX: return "ShearX";
    case AugmentOp::kShearY: return "ShearY";
    case AugmentOp::kTranslateX: return "TranslateX";
    case AugmentOp::kTranslateY: return "TranslateY";
    case AugmentOp::kRotate: return "Rotate";
    case AugmentOp::kBrightness: return "Brightness";
    case AugmentOp::kColor: return "Color";
    case AugmentOp::kContrast: return "Contrast";
    case AugmentOp::kSharpness: return "Sharpness";
    case AugmentOp::kPosterize: return "Posterize";
    case AugmentOp::kSolarize: return "Solarize";
    case AugmentOp::kAutoContrast: return "AutoContrast";
    case AugmentOp::kEqualize: return "Equalize";
    case AugmentOp::kInvert: return "Invert";
    case AugmentOp::kAdjustBrightness: return "adjust_brightness";
    case AugmentOp::kAdjustContrast: return "adjust_contrast";
    case AugmentOp::kAdjustSaturation: return "adjust_saturation";
    case AugmentOp::kAdjustHue: return "adjust_hue";
    case AugmentOp::kAdjustSharpness: return "adjust_sharpness";
    case AugmentOp::kRgbToGrayscale: return "rgb_to_grayscale";
    case AugmentOp::kTimmRotate: return "timm_rotate";
    case AugmentOp::kTimmShearX: return "timm_shear_x";
    case AugmentOp::kTimmShearY: return "timm_shear_y";
    case AugmentOp::kTimmTranslateX: return "timm_translate_x";
    case AugmentOp::kTimmTranslateY: return "timm_translate_y";
    case AugmentOp::kTimmSolarizeAdd: return "timm_solarize_add";
  }
  return "?";
}

std::string recorded_op_name(const AppliedOp& op) {
  std::string name(augment_op_name(op.op));
  if (timm_geometric(op.op)) name += ":" + std::string(interpolation_name(op.interpolation));
  return name;
}

AppliedOp op_from_record(std::string_view name, double magnitude) {
  const std::size_t colon = name.find(':');
  const std::string_view base = name.substr(0, colon);
  for (int i = 0; i <= static_cast<int>(AugmentOp::kTimmSolarizeAdd); ++i) {
    const auto op = static_cast<AugmentOp>(i);
    if (augment_op_name(op) != base) continue;
    AppliedOp applied{op, magnitude};
    if (!timm_geometric(op)) {
      if (colon != std::string_view::npos) break;
      return applied;
    }
    const std::string_view filter = colon == std::string_view::npos ? "" : name.substr(colon + 1);
    if (filter == "bilinear") {
      applied.interpolation = PolicyInterpolation::kBilinear;
    } else if (filter == "bicubic") {
      applied.interpolation = PolicyInterpolation::kBicubic;
    } else if (filter != "nearest") {
      break;
    }
    return applied;
  }
  throw ArgumentError("no augmentation operation named '" + std::string(name.substr(0, 80)) + "'");
}

PolicyKind parse_policy_kind(std::string_view name) {
  if (name.starts_with("rand-") || name == "rand") return PolicyKind::kTimmRandAugment;
  if (name == "ta_wide") return PolicyKind::kTrivialAugmentWide;
  if (name == "ra") return PolicyKind::kRandAugment;
  if (name == "imagenet") return PolicyKind::kAutoAugmentImageNet;
  throw ArgumentError("unknown augmentation policy '" + std::string(name.substr(0, 80)) +
                      "': expected ta_wide (TrivialAugmentWide), ra (RandAugment), imagenet (AutoAugment's "
                      "ImageNet policy) or a timm RandAugment string (rand-m9-mstd0.5-inc1)");
}

AutoAugmentPolicy::AutoAugmentPolicy(AutoAugmentOptions options) : options_(std::move(options)) {
  if (options_.kind == PolicyKind::kTimmRandAugment) {
    timm_ = parse_timm_rand_augment(options_.timm_config);
    return;
  }
  if (options_.kind == PolicyKind::kAutoAugmentImageNet) return;
  if (options_.num_magnitude_bins < 2 || options_.num_magnitude_bins > 1000) {
    throw ArgumentError("the number of magnitude bins must be from 2 to 1000, not " +
                        std::to_string(options_.num_magnitude_bins));
  }
  if (options_.kind != PolicyKind::kRandAugment) return;
  if (options_.magnitude < 0 || options_.magnitude >= options_.num_magnitude_bins) {
    throw ArgumentError("RandAugment's magnitude must be from 0 to " + std::to_string(options_.num_magnitude_bins - 1) +
                        " (a bin of " + std::to_string(options_.num_magnitude_bins) + "), not " +
                        std::to_string(options_.magnitude));
  }
  if (options_.num_ops < 0 || options_.num_ops > 16) {
    throw ArgumentError("RandAugment's number of operations must be from 0 to 16, not " +
                        std::to_string(options_.num_ops));
  }
}

std::vector<AppliedOp> AutoAugmentPolicy::draw(int width, int height, std::mt19937_64& rng) const {
  std::vector<AppliedOp> out;
  switch (options_.kind) {
    case PolicyKind::kTrivialAugmentWide: draw_trivial_augment(options_, rng, out); break;
    case PolicyKind::kRandAugment: draw_rand_augment(options_, width, height, rng, out); break;
    case PolicyKind::kAutoAugmentImageNet: draw_auto_augment(width, height, rng, out); break;
    case PolicyKind::kTimmRandAugment:
      draw_timm_rand_augment(timm_, width, height, options_.timm_random_interpolation, options_.geometric.interpolation,
                             rng, out);
      break;
  }
  return out;
}

void apply_ops(std::span<const AppliedOp> ops, RgbImage image, const GeometricOptions& options,
               std::vector<std::uint8_t>& scratch) {
  if (image.width <= 0 || image.height <= 0) return;
  for (const AppliedOp& op : ops) apply_op(op, image, options, scratch);
}

float torch_linspace_at(double start, double end, int steps, int i) {
  const float a = static_cast<float>(start), b = static_cast<float>(end);
  if (steps == 1) return a;
  const float step = (b - a) / static_cast<float>(steps - 1);
  const int halfway = steps / 2;
  // torch's kernel: from either end, with fused multiply-adds.
  const auto scalar = [&](int idx) {
    return idx < halfway ? std::fma(step, static_cast<float>(idx), a)
                         : std::fma(-step, static_cast<float>(steps - idx - 1), b);
  };
  constexpr int kLanes = 8;
  const int vectorized = steps / (2 * kLanes) * (2 * kLanes);
  if (i >= vectorized) return scalar(i);
  // Vectors of eight: a base from the nearer end, then base + k * step
  // rounded twice (a product, then a sum).
  const int first = i / kLanes * kLanes;
  const float base = scalar(first);
  const float offset = static_cast<float>(i - first) * step;
  return base + offset;
}

}  // namespace tensorcom::imaging
