#include "tensorcom/imaging/timm_augment.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <limits>

#include "tensorcom/codec/error.h"

namespace tensorcom::imaging {

namespace {

// timm's _RAND_TRANSFORMS and _RAND_INCREASING_TRANSFORMS share this order;
// the increasing list swaps in the *Increasing variants.
enum class TimmOp {
  kAutoContrast,
  kEqualize,
  kInvert,
  kRotate,
  kPosterize,
  kSolarize,
  kSolarizeAdd,
  kColor,
  kContrast,
  kBrightness,
  kSharpness,
  kShearX,
  kShearY,
  kTranslateXRel,
  kTranslateYRel,
};
constexpr int kTimmOps = 15;
constexpr double kLevelDenominator = 10.0;
constexpr double kTranslatePercent = 0.45;

[[noreturn]] void refuse(std::string_view config, const std::string& why) {
  throw ArgumentError("timm RandAugment '" + std::string(config.substr(0, 80)) + "': " + why);
}

int parse_int(std::string_view config, std::string_view key, std::string_view value) {
  int out = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (error != std::errc() || end != value.data() + value.size() || out < 0 || out > 1000) {
    refuse(config, "'" + std::string(key) + std::string(value) + "' needs a whole number from 0 to 1000");
  }
  return out;
}

double parse_double(std::string_view config, std::string_view key, std::string_view value) {
  const std::string text(value);
  char* end = nullptr;
  const double out = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(out >= 0)) {
    refuse(config, "'" + std::string(key) + text + "' needs a number of at least 0");
  }
  return out;
}

// _randomly_negate: one draw, negative when it is above one half.
double randomly_negate(double v, std::mt19937_64& rng) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng) > 0.5 ? -v : v;
}

PolicyInterpolation pick(bool random, PolicyInterpolation fixed, std::mt19937_64& rng) {
  if (!random) return fixed;
  return std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? PolicyInterpolation::kBilinear
                                                            : PolicyInterpolation::kBicubic;
}

// The level functions: the argument timm's op function gets at magnitude m.
void append_op(TimmOp op, double m, bool increasing, int width, int height, bool random_interpolation,
               PolicyInterpolation fixed, std::mt19937_64& rng, std::vector<AppliedOp>& out) {
  const double level = m / kLevelDenominator;
  const auto enhance = [&](AugmentOp kind) {
    const double factor = increasing ? std::max(0.1, 1.0 + randomly_negate(level * 0.9, rng)) : level * 1.8 + 0.1;
    out.push_back({kind, factor});
  };
  const auto geometric = [&](AugmentOp kind, double argument) {
    out.push_back({kind, argument, pick(random_interpolation, fixed, rng)});
  };
  switch (op) {
    case TimmOp::kAutoContrast: out.push_back({AugmentOp::kAutoContrast, 0}); return;
    case TimmOp::kEqualize: out.push_back({AugmentOp::kEqualize, 0}); return;
    case TimmOp::kInvert: out.push_back({AugmentOp::kInvert, 0}); return;
    case TimmOp::kRotate: {
      const double degrees = randomly_negate(level * 30.0, rng);
      return geometric(AugmentOp::kTimmRotate, degrees);
    }
    case TimmOp::kPosterize: {
      const int bits = static_cast<int>(level * 4);
      out.push_back({AugmentOp::kPosterize, static_cast<double>(increasing ? 4 - bits : bits)});
      return;
    }
    case TimmOp::kSolarize: {
      const int threshold = std::min(256, static_cast<int>(level * 256));
      out.push_back({AugmentOp::kSolarize, static_cast<double>(increasing ? 256 - threshold : threshold)});
      return;
    }
    case TimmOp::kSolarizeAdd:
      out.push_back({AugmentOp::kTimmSolarizeAdd, static_cast<double>(std::min(128, static_cast<int>(level * 110)))});
      return;
    case TimmOp::kColor: return enhance(AugmentOp::kAdjustSaturation);
    case TimmOp::kContrast: return enhance(AugmentOp::kAdjustContrast);
    case TimmOp::kBrightness: return enhance(AugmentOp::kAdjustBrightness);
    case TimmOp::kSharpness: return enhance(AugmentOp::kAdjustSharpness);
    case TimmOp::kShearX: return geometric(AugmentOp::kTimmShearX, randomly_negate(level * 0.3, rng));
    case TimmOp::kShearY: return geometric(AugmentOp::kTimmShearY, randomly_negate(level * 0.3, rng));
    case TimmOp::kTranslateXRel: {
      const double percent = randomly_negate(level * kTranslatePercent, rng);
      return geometric(AugmentOp::kTimmTranslateX, percent * width);
    }
    case TimmOp::kTranslateYRel: {
      const double percent = randomly_negate(level * kTranslatePercent, rng);
      return geometric(AugmentOp::kTimmTranslateY, percent * height);
    }
  }
}

}  // namespace

TimmRandAugmentOptions parse_timm_rand_augment(std::string_view config) {
  TimmRandAugmentOptions o;
  std::size_t start = 0;
  bool first = true;
  while (start <= config.size()) {
    const std::size_t end = std::min(config.find('-', start), config.size());
    const std::string_view section = config.substr(start, end - start);
    start = end + 1;
    if (first) {
      if (section != "rand") refuse(config, "timm's RandAugment strings start with 'rand-'");
      first = false;
      continue;
    }
    const std::size_t digit = section.find_first_of("0123456789");
    if (section.starts_with("t") || section.starts_with("w")) {
      refuse(config, "weighted op choices ('" + std::string(section) + "') are not supported");
    }
    if (digit == std::string_view::npos) continue;  // timm skips a section without digits
    const std::string_view key = section.substr(0, digit), value = section.substr(digit);
    if (key == "m") {
      o.magnitude = parse_int(config, key, value);
    } else if (key == "n") {
      o.num_layers = parse_int(config, key, value);
    } else if (key == "mstd") {
      o.magnitude_std = parse_double(config, key, value);
      if (o.magnitude_std > 100) o.magnitude_std = std::numeric_limits<double>::infinity();
    } else if (key == "mmax") {
      o.magnitude_max = parse_int(config, key, value);
    } else if (key == "inc") {
      o.increasing = true;  // timm takes any value as true, "inc0" too
    } else if (key == "p") {
      o.probability = parse_double(config, key, value);
      if (o.probability > 1) refuse(config, "'p' is a probability, at most 1");
    } else {
      refuse(config, "unknown section '" + std::string(section) + "' (timm knows m, n, mstd, mmax, inc, p)");
    }
  }
  if (o.num_layers > 16) refuse(config, "at most 16 operations an image ('n')");
  return o;
}

void draw_timm_rand_augment(const TimmRandAugmentOptions& o, int width, int height, bool random_interpolation,
                            PolicyInterpolation fixed, std::mt19937_64& rng, std::vector<AppliedOp>& out) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double upper = o.magnitude_max != 0 ? o.magnitude_max : kLevelDenominator;
  for (int i = 0; i < o.num_layers; ++i) {
    const auto op = static_cast<TimmOp>(std::uniform_int_distribution<int>(0, kTimmOps - 1)(rng));
    if (o.probability < 1.0 && unit(rng) > o.probability) continue;
    double m = o.magnitude;
    if (o.magnitude_std > 0) {
      m = std::isinf(o.magnitude_std) ? o.magnitude * unit(rng)
                                      : std::normal_distribution<double>(o.magnitude, o.magnitude_std)(rng);
    }
    m = std::max(0.0, std::min(m, upper));
    append_op(op, m, o.increasing, width, height, random_interpolation, fixed, rng, out);
  }
}

}  // namespace tensorcom::imaging
