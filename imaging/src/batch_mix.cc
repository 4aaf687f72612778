#include "tensorcom/imaging/batch_mix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tensorcom/codec/error.h"
#include "tensorcom/codec/half.h"

namespace tensorcom::imaging {

namespace {

double unit(std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }

// An integer in [low, high) as numpy's randint(low, high); low when the
// range is empty (where numpy would refuse a degenerate minmax).
std::int32_t below(std::int32_t low, std::int32_t high, std::mt19937_64& rng) {
  if (high <= low) return low;
  return std::uniform_int_distribution<std::int32_t>(low, high - 1)(rng);
}

// Beta(alpha, alpha) from two gamma draws. For a tiny alpha both may
// underflow to 0: the distribution's limit, 0 or 1 evenly, stands in.
double beta(double alpha, std::mt19937_64& rng) {
  std::gamma_distribution<double> gamma(alpha, 1.0);
  const double x = gamma(rng);
  const double y = gamma(rng);
  if (x + y > 0) return x / (x + y);
  return unit(rng) < 0.5 ? 0.0 : 1.0;
}

double as_float32(double v) { return static_cast<float>(v); }

bool mixup_on(const MixOptions& o) { return o.mixup_alpha > 0; }
bool cutmix_on(const MixOptions& o) { return o.cutmix_alpha > 0 || o.cutmix_minmax.has_value(); }

// Which operation and its lambda, before any box.
struct Drawn {
  MixKind kind = MixKind::kNone;
  double lambda = 1;
};

Drawn draw_kind_and_lambda(const MixOptions& o, std::mt19937_64& rng) {
  if (o.probability < 1 && !(unit(rng) < o.probability)) return {};
  bool cutmix = cutmix_on(o);
  if (mixup_on(o) && cutmix_on(o)) cutmix = unit(rng) < o.switch_probability;
  // timm takes cutmix_alpha as 1 under a minmax.
  const double alpha = cutmix ? (o.cutmix_minmax ? 1.0 : o.cutmix_alpha) : o.mixup_alpha;
  return {cutmix ? MixKind::kCutMix : MixKind::kMixUp, beta(alpha, rng)};
}

double area_left(const MixBox& b, int height, int width) {
  const double area = static_cast<double>(b.x1 - b.x0) * static_cast<double>(b.y1 - b.y0);
  return 1.0 - area / (static_cast<double>(height) * static_cast<double>(width));
}

// torchvision's CutMix box: a centre anywhere, half-sides r * side.
MixBox torchvision_box(double lambda, int height, int width, std::mt19937_64& rng) {
  const std::int32_t rx = below(0, width, rng);
  const std::int32_t ry = below(0, height, rng);
  const double r = 0.5 * std::sqrt(1.0 - lambda);
  const auto half_w = static_cast<std::int32_t>(r * width);
  const auto half_h = static_cast<std::int32_t>(r * height);
  return {std::max(rx - half_w, 0), std::max(ry - half_h, 0), std::min(rx + half_w, width),
          std::min(ry + half_h, height)};
}

// timm's rand_bbox (no margin) or rand_bbox_minmax.
MixBox timm_box(const MixOptions& o, double lambda, int height, int width, std::mt19937_64& rng) {
  if (o.cutmix_minmax) {
    const auto [low, high] = *o.cutmix_minmax;
    const std::int32_t cut_h =
        below(static_cast<std::int32_t>(height * low), static_cast<std::int32_t>(height * high), rng);
    const std::int32_t cut_w =
        below(static_cast<std::int32_t>(width * low), static_cast<std::int32_t>(width * high), rng);
    const std::int32_t y0 = below(0, height - cut_h, rng);
    const std::int32_t x0 = below(0, width - cut_w, rng);
    return {x0, y0, x0 + cut_w, y0 + cut_h};
  }
  const double ratio = std::sqrt(1.0 - lambda);
  const auto cut_h = static_cast<std::int32_t>(height * ratio);
  const auto cut_w = static_cast<std::int32_t>(width * ratio);
  const std::int32_t cy = below(0, height, rng);
  const std::int32_t cx = below(0, width, rng);
  return {std::clamp(cx - cut_w / 2, 0, width), std::clamp(cy - cut_h / 2, 0, height),
          std::clamp(cx + cut_w / 2, 0, width), std::clamp(cy + cut_h / 2, 0, height)};
}

// One draw completed with its box and lambda as timm keeps them (float32
// in pair and elem modes).
SampleMix timm_draw(const MixOptions& o, int height, int width, bool float32_lambda, std::mt19937_64& rng) {
  Drawn d = draw_kind_and_lambda(o, rng);
  SampleMix m;
  if (d.kind == MixKind::kNone) return m;
  m.kind = d.kind;
  m.lambda = float32_lambda ? as_float32(d.lambda) : d.lambda;
  if (m.lambda == 1.0) return SampleMix{};  // timm mixes nothing at lambda 1
  if (m.kind == MixKind::kCutMix) {
    m.box = timm_box(o, m.lambda, height, width, rng);
    if (o.correct_lambda || o.cutmix_minmax) m.lambda = area_left(m.box, height, width);
    if (float32_lambda) m.lambda = as_float32(m.lambda);
  }
  return m;
}

std::vector<SampleMix> draw_torchvision(const MixOptions& o, std::size_t count, int height, int width,
                                        std::mt19937_64& rng) {
  Drawn d = draw_kind_and_lambda(o, rng);
  SampleMix m;
  m.kind = d.kind;
  // torch's Beta samples float32.
  m.lambda = d.kind == MixKind::kNone ? 1.0 : as_float32(d.lambda);
  if (m.kind == MixKind::kCutMix) {
    m.box = torchvision_box(m.lambda, height, width, rng);
    m.lambda = area_left(m.box, height, width);
  }
  std::vector<SampleMix> mixes(count, m);
  for (std::size_t i = 0; i < count; ++i) mixes[i].partner = static_cast<std::int32_t>((i + count - 1) % count);
  return mixes;
}

std::int32_t mirror(std::size_t i, std::size_t count) { return static_cast<std::int32_t>(count - 1 - i); }

std::vector<SampleMix> draw_timm(const MixOptions& o, std::size_t count, int height, int width, std::mt19937_64& rng) {
  std::vector<SampleMix> mixes(count);
  if (o.mode == MixMode::kBatch) {
    const SampleMix m = timm_draw(o, height, width, false, rng);
    for (std::size_t i = 0; i < count; ++i) mixes[i] = m;
  } else if (o.mode == MixMode::kPair) {
    for (std::size_t i = 0; i < count / 2; ++i)
      mixes[i] = mixes[count - 1 - i] = timm_draw(o, height, width, true, rng);
  } else {
    for (std::size_t i = 0; i < count; ++i) mixes[i] = timm_draw(o, height, width, true, rng);
  }
  for (std::size_t i = 0; i < count; ++i) mixes[i].partner = mirror(i, count);
  return mixes;
}

std::string describe(double v) { return std::to_string(v); }

void check_probability(double p, const char* name) {
  if (!(p >= 0 && p <= 1))
    throw ArgumentError(std::string(name) + " must be a probability from 0 to 1, not " + describe(p));
}

void check_alpha(double alpha, const char* name) {
  if (!(alpha >= 0 && std::isfinite(alpha))) {
    throw ArgumentError(std::string(name) + " must be 0 (off) or a finite alpha > 0, not " + describe(alpha));
  }
}

// ---- pixels ----------------------------------------------------------------

std::size_t element_bytes(MixPixels p) {
  switch (p) {
    case MixPixels::kUInt8: return 1;
    case MixPixels::kFloat16: return 2;
    case MixPixels::kFloat32: return 4;
  }
  return 1;
}

// Weights as torchvision and timm apply them: lambda and 1 - lambda (in
// double) each rounded to float32, products and sum in float32.
struct Weights {
  float self;
  float partner;
};

Weights weights_of(double lambda) { return {static_cast<float>(lambda), static_cast<float>(1.0 - lambda)}; }

// Kept between batches: its pages are not faulted in (and zeroed by the
// kernel) again for every batch.
std::vector<std::byte>& mix_scratch() {
  thread_local std::vector<std::byte> bytes;
  return bytes;
}

void blend_uint8(const std::uint8_t* self, const std::uint8_t* partner, std::uint8_t* out, std::size_t n, Weights w) {
  // Adding and taking away 2^23 rounds a float in [0, 2^23) to an integer,
  // to nearest, ties to even (np.rint's rounding), in two vectorisable
  // operations where nearbyint is a call an element on baseline x86-64.
  constexpr float kRound = 8388608.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float a = static_cast<float>(self[i]) * w.self;
    const float b = static_cast<float>(partner[i]) * w.partner;
    const float rounded = (std::max(a + b, 0.0f) + kRound) - kRound;
    out[i] = static_cast<std::uint8_t>(std::min(rounded, 255.0f));
  }
}

void blend_float32(const float* self, const float* partner, float* out, std::size_t n, Weights w) {
  for (std::size_t i = 0; i < n; ++i) {
    const float a = self[i] * w.self;
    const float b = partner[i] * w.partner;
    out[i] = a + b;
  }
}

void blend_float16(const std::uint16_t* self, const std::uint16_t* partner, std::uint16_t* out, std::size_t n,
                   Weights w) {
  for (std::size_t i = 0; i < n; ++i) {
    const float a = half_to_float(self[i]) * w.self;
    const float b = half_to_float(partner[i]) * w.partner;
    out[i] = float_to_half(a + b);
  }
}

void blend(MixPixels pixels, const std::byte* self, const std::byte* partner, std::byte* out, std::size_t elements,
           Weights w) {
  switch (pixels) {
    case MixPixels::kUInt8:
      blend_uint8(reinterpret_cast<const std::uint8_t*>(self), reinterpret_cast<const std::uint8_t*>(partner),
                  reinterpret_cast<std::uint8_t*>(out), elements, w);
      return;
    case MixPixels::kFloat32:
      blend_float32(reinterpret_cast<const float*>(self), reinterpret_cast<const float*>(partner),
                    reinterpret_cast<float*>(out), elements, w);
      return;
    case MixPixels::kFloat16:
      blend_float16(reinterpret_cast<const std::uint16_t*>(self), reinterpret_cast<const std::uint16_t*>(partner),
                    reinterpret_cast<std::uint16_t*>(out), elements, w);
      return;
  }
}

// Copies the box of `from` into `to` (whole images of one layout).
void paste_box(const BatchPixels& b, const MixBox& box, const std::byte* from, std::byte* to) {
  const std::size_t element = element_bytes(b.pixels);
  const auto width = static_cast<std::size_t>(b.width);
  const auto height = static_cast<std::size_t>(b.height);
  const auto channels = static_cast<std::size_t>(b.channels);
  const auto x0 = static_cast<std::size_t>(box.x0);
  const auto cols = static_cast<std::size_t>(box.x1 - box.x0);
  if (b.channels_last) {
    const std::size_t row = width * channels * element;
    for (auto y = static_cast<std::size_t>(box.y0); y < static_cast<std::size_t>(box.y1); ++y) {
      const std::size_t at = y * row + x0 * channels * element;
      std::memcpy(to + at, from + at, cols * channels * element);
    }
    return;
  }
  for (std::size_t c = 0; c < channels; ++c) {
    for (auto y = static_cast<std::size_t>(box.y0); y < static_cast<std::size_t>(box.y1); ++y) {
      const std::size_t at = ((c * height + y) * width + x0) * element;
      std::memcpy(to + at, from + at, cols * element);
    }
  }
}

void check_fits(std::span<const SampleMix> mixes, const BatchPixels& b) {
  if (mixes.size() != b.count) {
    throw ArgumentError("mix_batch: " + std::to_string(mixes.size()) + " mixes for a batch of " +
                        std::to_string(b.count));
  }
  if (b.count > 0 && (b.data == nullptr || b.height <= 0 || b.width <= 0 || b.channels <= 0)) {
    throw ArgumentError("mix_batch: a batch needs memory and positive height, width and channels");
  }
  for (std::size_t i = 0; i < mixes.size(); ++i) {
    const SampleMix& m = mixes[i];
    if (m.kind == MixKind::kNone) continue;
    if (m.partner < 0 || static_cast<std::size_t>(m.partner) >= b.count) {
      throw ArgumentError("mix_batch: sample " + std::to_string(i) + "'s partner " + std::to_string(m.partner) +
                          " is outside the batch of " + std::to_string(b.count));
    }
    const MixBox& x = m.box;
    if (m.kind == MixKind::kCutMix &&
        !(0 <= x.x0 && x.x0 <= x.x1 && x.x1 <= b.width && 0 <= x.y0 && x.y0 <= x.y1 && x.y1 <= b.height)) {
      throw ArgumentError("mix_batch: sample " + std::to_string(i) + "'s box is outside its " +
                          std::to_string(b.width) + "x" + std::to_string(b.height) + " image");
    }
    if (m.kind == MixKind::kMixUp && !std::isfinite(m.lambda)) {
      throw ArgumentError("mix_batch: sample " + std::to_string(i) + "'s lambda is not finite");
    }
  }
}

}  // namespace

std::optional<MixMode> parse_mix_mode(std::string_view name) noexcept {
  for (MixMode m : {MixMode::kTorchvision, MixMode::kBatch, MixMode::kPair, MixMode::kElem}) {
    if (name == mix_mode_name(m)) return m;
  }
  return std::nullopt;
}

std::string_view mix_mode_name(MixMode mode) noexcept {
  switch (mode) {
    case MixMode::kTorchvision: return "torchvision";
    case MixMode::kBatch: return "batch";
    case MixMode::kPair: return "pair";
    case MixMode::kElem: return "elem";
  }
  return "torchvision";
}

void check_mix_options(const MixOptions& o) {
  check_alpha(o.mixup_alpha, "the mixup alpha");
  check_alpha(o.cutmix_alpha, "the cutmix alpha");
  if (!mixup_on(o) && !cutmix_on(o)) {
    throw ArgumentError("MixUp/CutMix: a mixup alpha > 0, a cutmix alpha > 0 or a cutmix minmax is needed");
  }
  check_probability(o.probability, "the mix probability");
  check_probability(o.switch_probability, "the switch probability");
  if (o.cutmix_minmax) {
    const auto [low, high] = *o.cutmix_minmax;
    if (!(low > 0 && low <= high && high <= 1)) {
      throw ArgumentError("the cutmix minmax must be 0 < min <= max <= 1, not " + describe(low) + ", " +
                          describe(high));
    }
  }
}

std::vector<SampleMix> draw_batch_mix(const MixOptions& options, std::size_t count, int height, int width,
                                      std::mt19937_64& rng) {
  check_mix_options(options);
  if (height <= 0 || width <= 0) throw ArgumentError("MixUp/CutMix: images need a positive height and width");
  if (count == 0) return {};
  if (options.mode == MixMode::kTorchvision) return draw_torchvision(options, count, height, width, rng);
  if (count % 2 != 0) {
    throw ArgumentError("timm's Mixup (mode " + std::string(mix_mode_name(options.mode)) +
                        ") needs an even batch, not " + std::to_string(count));
  }
  return draw_timm(options, count, height, width, rng);
}

void mix_batch(std::span<const SampleMix> mixes, const BatchPixels& b) {
  check_fits(mixes, b);
  const std::size_t elements =
      static_cast<std::size_t>(b.height) * static_cast<std::size_t>(b.width) * static_cast<std::size_t>(b.channels);
  const std::size_t image_bytes = elements * element_bytes(b.pixels);
  auto* data = static_cast<std::byte*>(b.data);
  // Images are mixed in place from the last to the first. An image is kept
  // aside before it is overwritten only if an image mixed after it (a
  // lower index) takes it as partner: torchvision's roll keeps one image,
  // timm's mirrored pairs half of them, never the whole batch.
  std::vector<std::size_t> kept_at(b.count, b.count);
  std::size_t kept = 0;
  for (std::size_t j = 0; j < b.count; ++j) {
    const auto p = static_cast<std::size_t>(mixes[j].partner);
    if (mixes[j].kind != MixKind::kNone && p > j && mixes[p].kind != MixKind::kNone && kept_at[p] == b.count) {
      kept_at[p] = kept++;
    }
  }
  std::vector<std::byte>& aside = mix_scratch();
  if (aside.size() < kept * image_bytes) aside.resize(kept * image_bytes);
  for (std::size_t i = b.count; i-- > 0;) {
    const SampleMix& m = mixes[i];
    if (m.kind == MixKind::kNone) continue;
    std::byte* out = data + i * image_bytes;
    if (kept_at[i] != b.count) std::memcpy(aside.data() + kept_at[i] * image_bytes, out, image_bytes);
    const auto p = static_cast<std::size_t>(m.partner);
    const std::byte* partner =
        kept_at[p] != b.count && p > i ? aside.data() + kept_at[p] * image_bytes : data + p * image_bytes;
    if (m.kind == MixKind::kMixUp) {
      blend(b.pixels, out, partner, out, elements, weights_of(m.lambda));
    } else if (partner != out) {  // an image's own box is itself
      paste_box(b, m.box, partner, out);
    }
  }
}

void mix_targets(std::span<const SampleMix> mixes, std::span<const std::int64_t> labels, int num_classes,
                 double smoothing, std::span<float> out) {
  if (num_classes <= 0) throw ArgumentError("mix targets: num_classes must be positive");
  if (!(smoothing >= 0 && smoothing <= 1)) throw ArgumentError("mix targets: label smoothing must be in [0, 1]");
  const auto classes = static_cast<std::size_t>(num_classes);
  if (mixes.size() != labels.size() || out.size() != labels.size() * classes) {
    throw ArgumentError("mix targets: " + std::to_string(mixes.size()) + " mixes, " + std::to_string(labels.size()) +
                        " labels and room for " + std::to_string(out.size()) + " floats do not match");
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      throw ArgumentError("mix targets: label " + std::to_string(labels[i]) + " of sample " + std::to_string(i) +
                          " is outside [0, " + std::to_string(num_classes) + ")");
    }
    if (mixes[i].partner < 0 || static_cast<std::size_t>(mixes[i].partner) >= labels.size()) {
      throw ArgumentError("mix targets: sample " + std::to_string(i) + "'s partner is outside the batch");
    }
  }
  // timm's one_hot: torch.full(off) then scatter(on), both float32.
  const double off_value = smoothing / num_classes;
  const auto off = static_cast<float>(off_value);
  const auto on = static_cast<float>(1.0 - smoothing + off_value);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const Weights w = weights_of(mixes[i].lambda);
    const auto own = static_cast<std::size_t>(labels[i]);
    const auto partner = static_cast<std::size_t>(labels[static_cast<std::size_t>(mixes[i].partner)]);
    float* row = out.data() + i * classes;
    const float off_mixed = off * w.self + off * w.partner;
    std::fill(row, row + classes, off_mixed);
    row[own] = on * w.self + (own == partner ? on : off) * w.partner;
    if (partner != own) row[partner] = off * w.self + on * w.partner;
  }
}

}  // namespace tensorcom::imaging
