// libFuzzer target: the augmentation policies' operations on any crop size
// (1x1 and one-pixel-thin strips included) with any parameters, as the
// Python hooks and recorded metadata can give them. The first bytes choose
// the size, the operations and their magnitudes (any double, NaN and
// infinities included), the interpolation and fill; the rest are pixels.
// Nothing may crash or read or write outside the image.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensorcom/imaging/auto_augment.h"
#include "tensorcom/imaging/color_jitter.h"

using namespace tensorcom::imaging;

namespace {

class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  double number() {
    std::uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | byte();
    double value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  const std::uint8_t* rest(std::size_t& size) const {
    size = size_ - std::min(at_, size_);
    return data_ + std::min(at_, size_);
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// Magnitudes as the policies draw them, or any double at all.
double magnitude(Bytes& in) {
  const std::uint8_t how = in.byte();
  if (how < 128) return (how - 64) * 0.37;
  return in.number();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  const int width = 1 + in.byte() % 40, height = 1 + in.byte() % 40;
  GeometricOptions options;
  options.interpolation = (in.byte() & 1) ? PolicyInterpolation::kBilinear : PolicyInterpolation::kNearest;
  options.fill = {in.byte(), in.byte(), in.byte()};
  std::vector<AppliedOp> ops;
  const int count = in.byte() % 6;
  for (int i = 0; i < count; ++i) {
    const auto op = static_cast<AugmentOp>(in.byte() % (static_cast<int>(AugmentOp::kRgbToGrayscale) + 1));
    double m = magnitude(in);
    // Callers refuse magnitudes that are not finite; any other goes.
    if (!std::isfinite(m)) m = 0;
    ops.push_back({op, m});
  }
  // Drawn ones too, from a seed the input gives.
  std::mt19937_64 rng(in.byte());
  AutoAugmentOptions policy;
  policy.kind = static_cast<PolicyKind>(in.byte() % 3);
  policy.magnitude = in.byte() % 31;
  policy.num_ops = in.byte() % 4;
  const auto drawn = AutoAugmentPolicy(policy).draw(width, height, rng);
  ops.insert(ops.end(), drawn.begin(), drawn.end());
  draw_color_jitter(color_jitter_from(0.4, 0.4, 0.4, 0.1), 0.5, rng, ops);

  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width) * height * 3);
  std::size_t left = 0;
  const std::uint8_t* rest = in.rest(left);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = left ? rest[i % left] : static_cast<std::uint8_t>(i);
  std::vector<std::uint8_t> scratch;
  apply_ops(ops, {pixels.data(), width, height}, options, scratch);
  return 0;
}
