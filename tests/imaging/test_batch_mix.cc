// MixUp/CutMix: the draws' structure (partners, boxes, lambdas), the
// pixels and targets they give, and refusals of what does not fit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "tensorcom/codec/error.h"
#include "tensorcom/codec/half.h"
#include "tensorcom/imaging/batch_mix.h"
#include "tensorcom/imaging/sample_rng.h"

using namespace tensorcom;
using namespace tensorcom::imaging;

namespace {

MixOptions both(MixMode mode) {
  MixOptions o;
  o.mode = mode;
  o.mixup_alpha = 0.8;
  o.cutmix_alpha = 1.0;
  return o;
}

std::vector<std::uint8_t> ramp(std::size_t n, int seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::uint8_t>((i * 37 + static_cast<std::size_t>(seed) * 11) % 251);
  return v;
}

bool is_float32(double v) { return static_cast<double>(static_cast<float>(v)) == v; }

double box_share_left(const MixBox& b, int h, int w) {
  return 1.0 - static_cast<double>((b.x1 - b.x0) * (b.y1 - b.y0)) / (static_cast<double>(h) * w);
}

}  // namespace

TEST_CASE("torchvision's draw: one kind and lambda a batch, the batch rolled by one") {
  int cutmixes = 0;
  for (std::uint64_t n = 0; n < 400; ++n) {
    auto rng = sample_rng(7, n);
    const auto mixes = draw_batch_mix(both(MixMode::kTorchvision), 5, 30, 40, rng);
    REQUIRE(mixes.size() == 5);
    for (std::size_t i = 0; i < 5; ++i) {
      CHECK(mixes[i].partner == static_cast<std::int32_t>((i + 4) % 5));
      CHECK(mixes[i].kind == mixes[0].kind);
      CHECK(mixes[i].lambda == mixes[0].lambda);
    }
    const SampleMix& m = mixes[0];
    REQUIRE(m.kind != MixKind::kNone);
    CHECK(m.lambda >= 0);
    CHECK(m.lambda <= 1);
    if (m.kind == MixKind::kCutMix) {
      ++cutmixes;
      CHECK(m.box.x0 >= 0);
      CHECK(m.box.x1 <= 40);
      CHECK(m.box.y0 >= 0);
      CHECK(m.box.y1 <= 30);
      CHECK(m.lambda == box_share_left(m.box, 30, 40));
    } else {
      CHECK(is_float32(m.lambda));
    }
  }
  CHECK(cutmixes > 150);
  CHECK(cutmixes < 250);
}

TEST_CASE("timm's draws: mirrored partners; pairs share theirs; pair and elem lambdas are float32") {
  for (MixMode mode : {MixMode::kBatch, MixMode::kPair, MixMode::kElem}) {
    for (std::uint64_t n = 0; n < 100; ++n) {
      auto rng = sample_rng(3, n);
      const auto mixes = draw_batch_mix(both(mode), 8, 24, 24, rng);
      for (std::size_t i = 0; i < 8; ++i) {
        CHECK(mixes[i].partner == static_cast<std::int32_t>(7 - i));
        if (mode != MixMode::kElem) {
          CHECK(mixes[i].kind == mixes[7 - i].kind);
          CHECK(mixes[i].lambda == mixes[7 - i].lambda);
          CHECK(mixes[i].box == mixes[7 - i].box);
        }
        if (mode != MixMode::kBatch) CHECK(is_float32(mixes[i].lambda));
        if (mixes[i].kind == MixKind::kCutMix) {
          CHECK(mixes[i].lambda == doctest::Approx(box_share_left(mixes[i].box, 24, 24)).epsilon(1e-6));
        }
      }
    }
  }
  auto rng = sample_rng(1, 1);
  CHECK_THROWS_AS((void)draw_batch_mix(both(MixMode::kElem), 7, 24, 24, rng), ArgumentError);
}

TEST_CASE("a mix probability of 0 mixes nothing; a minmax box has sides within its shares") {
  MixOptions never = both(MixMode::kElem);
  never.probability = 0;
  auto rng = sample_rng(5, 0);
  for (const SampleMix& m : draw_batch_mix(never, 6, 20, 20, rng)) CHECK(m.kind == MixKind::kNone);

  MixOptions minmax;
  minmax.mode = MixMode::kBatch;
  minmax.cutmix_minmax = {{0.2, 0.8}};
  for (std::uint64_t n = 0; n < 200; ++n) {
    auto r = sample_rng(9, n);
    const SampleMix m = draw_batch_mix(minmax, 2, 50, 100, r)[0];
    REQUIRE(m.kind == MixKind::kCutMix);
    CHECK(m.box.y1 - m.box.y0 >= 10);
    CHECK(m.box.y1 - m.box.y0 < 40);
    CHECK(m.box.x1 - m.box.x0 >= 20);
    CHECK(m.box.x1 - m.box.x0 < 80);
    CHECK(m.box.x1 <= 100);
    CHECK(m.box.y1 <= 50);
  }
}

TEST_CASE("Beta(alpha, alpha) lambdas have its mean and variance") {
  MixOptions o;
  o.mode = MixMode::kBatch;
  o.mixup_alpha = 0.4;
  double sum = 0;
  double squares = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto rng = sample_rng(11, static_cast<std::uint64_t>(i));
    const double l = draw_batch_mix(o, 2, 8, 8, rng)[0].lambda;
    sum += l;
    squares += l * l;
  }
  const double mean = sum / n;
  const double variance = squares / n - mean * mean;
  CHECK(mean == doctest::Approx(0.5).epsilon(0.02));
  // Beta(a, a): 1 / (4 (2a + 1)).
  CHECK(variance == doctest::Approx(1.0 / (4 * 1.8)).epsilon(0.03));
}

TEST_CASE("MixUp pixels: float32 products and sum, uint8 rounded half to even") {
  const std::size_t elements = 4 * 3 * 3;  // one 4 x 3 RGB image
  std::vector<std::uint8_t> bytes = ramp(2 * elements, 1);
  const std::vector<std::uint8_t> before = bytes;
  std::vector<SampleMix> mixes(2);
  mixes[0] = {MixKind::kMixUp, 1, 0.3, {}};
  mixes[1] = {MixKind::kMixUp, 0, 0.3, {}};
  mix_batch(mixes, {bytes.data(), MixPixels::kUInt8, 2, 4, 3, 3, true});
  const float ws = 0.3f;
  const auto wp = static_cast<float>(1.0 - 0.3);
  for (std::size_t i = 0; i < elements; ++i) {
    const float a = before[i] * ws;
    const float b = before[elements + i] * wp;
    CHECK(bytes[i] == static_cast<std::uint8_t>(std::nearbyint(a + b)));
  }
  std::vector<std::uint8_t> ties = {1, 3};  // 0.5 * 1 + 0.5 * 3 = 2; 0.5 * 1 + 0.5 * 0 = 0.5 -> 0
  std::vector<std::uint8_t> tie_batch = {1, 0};
  mix_batch(std::vector<SampleMix>{{MixKind::kMixUp, 1, 0.5, {}}, {MixKind::kNone, 1, 1, {}}},
            {tie_batch.data(), MixPixels::kUInt8, 2, 1, 1, 1, true});
  CHECK(tie_batch[0] == 0);
  CHECK(tie_batch[1] == 0);

  std::vector<float> floats(2 * elements);
  for (std::size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>(std::sin(i * 0.7) * 2.1);
  const std::vector<float> fbefore = floats;
  mix_batch(mixes, {floats.data(), MixPixels::kFloat32, 2, 4, 3, 3, false});
  for (std::size_t i = 0; i < elements; ++i) {
    const float a = fbefore[elements + i] * ws;
    const float b = fbefore[i] * wp;
    CHECK(floats[elements + i] == a + b);
  }

  std::vector<std::uint16_t> halves(2 * elements);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = float_to_half(fbefore[i]);
  const std::vector<std::uint16_t> hbefore = halves;
  mix_batch(mixes, {halves.data(), MixPixels::kFloat16, 2, 4, 3, 3, true});
  for (std::size_t i = 0; i < elements; ++i) {
    CHECK(halves[i] == float_to_half(half_to_float(hbefore[i]) * ws + half_to_float(hbefore[elements + i]) * wp));
  }
}

TEST_CASE("CutMix pastes the partner's box, channels last or first, and leaves the rest") {
  const int h = 5;
  const int w = 6;
  const std::size_t image = static_cast<std::size_t>(h) * w * 3;
  const MixBox box{1, 2, 4, 5};
  for (bool last : {true, false}) {
    std::vector<std::uint8_t> bytes = ramp(3 * image, 2);
    const std::vector<std::uint8_t> before = bytes;
    const std::vector<SampleMix> mixes = {
        {MixKind::kCutMix, 2, 0.5, box}, {MixKind::kNone, 0, 1, {}}, {MixKind::kCutMix, 0, 0.5, box}};
    mix_batch(mixes, {bytes.data(), MixPixels::kUInt8, 3, h, w, 3, last});
    for (int i = 0; i < 3; ++i) {
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < h; ++y) {
          for (int x = 0; x < w; ++x) {
            const std::size_t at =
                last ? static_cast<std::size_t>((y * w + x) * 3 + c) : static_cast<std::size_t>((c * h + y) * w + x);
            const bool inside = x >= box.x0 && x < box.x1 && y >= box.y0 && y < box.y1;
            const int from = (i == 1 || !inside) ? i : mixes[static_cast<std::size_t>(i)].partner;
            CHECK(bytes[static_cast<std::size_t>(i) * image + at] ==
                  before[static_cast<std::size_t>(from) * image + at]);
          }
        }
      }
    }
  }
}

TEST_CASE("soft targets: one-hot rows, smoothed, weighted lambda and 1 - lambda") {
  const std::vector<SampleMix> mixes = {
      {MixKind::kMixUp, 1, 0.7, {}}, {MixKind::kMixUp, 0, 0.7, {}}, {MixKind::kNone, 2, 1.0, {}}};
  const std::vector<std::int64_t> labels = {0, 3, 3};
  std::vector<float> out(3 * 4);
  mix_targets(mixes, labels, 4, 0.1, out);
  const double off = 0.1 / 4;
  const auto f_off = static_cast<float>(off);
  const auto f_on = static_cast<float>(1 - 0.1 + off);
  const float ws = 0.7f;
  const auto wp = static_cast<float>(1.0 - 0.7);
  CHECK(out[0] == f_on * ws + f_off * wp);
  CHECK(out[3] == f_off * ws + f_on * wp);
  CHECK(out[1] == f_off * ws + f_off * wp);
  CHECK(out[4 + 3] == f_on * ws + f_off * wp);
  CHECK(out[8 + 3] == f_on * 1.0f + f_on * 0.0f);
  for (int row = 0; row < 3; ++row) {
    CHECK(std::accumulate(out.begin() + row * 4, out.begin() + row * 4 + 4, 0.0) == doctest::Approx(1.0));
  }
}

TEST_CASE("mixes that do not fit the batch are refused, naming what is wrong") {
  std::vector<std::uint8_t> bytes(2 * 4 * 4 * 3);
  const BatchPixels batch{bytes.data(), MixPixels::kUInt8, 2, 4, 4, 3, true};
  CHECK_THROWS_WITH_AS(mix_batch(std::vector<SampleMix>{{MixKind::kMixUp, 2, 0.5, {}}, {}}, batch),
                       doctest::Contains("partner 2 is outside the batch of 2"), ArgumentError);
  CHECK_THROWS_WITH_AS(mix_batch(std::vector<SampleMix>{{MixKind::kCutMix, 1, 0.5, {0, 0, 5, 2}}, {}}, batch),
                       doctest::Contains("box is outside its 4x4 image"), ArgumentError);
  CHECK_THROWS_AS(mix_batch(std::vector<SampleMix>(3), batch), ArgumentError);
  std::vector<float> out(2);
  CHECK_THROWS_WITH_AS(mix_targets(std::vector<SampleMix>(2), std::vector<std::int64_t>{0, 5}, 1, 0, out),
                       doctest::Contains("label 5 of sample 1"), ArgumentError);

  MixOptions bad;
  CHECK_THROWS_WITH_AS(check_mix_options(bad), doctest::Contains("is needed"), ArgumentError);
  bad.mixup_alpha = -1;
  CHECK_THROWS_WITH_AS(check_mix_options(bad), doctest::Contains("mixup alpha"), ArgumentError);
  bad.mixup_alpha = 1;
  bad.switch_probability = 2;
  CHECK_THROWS_WITH_AS(check_mix_options(bad), doctest::Contains("switch probability"), ArgumentError);
  bad.switch_probability = 0.5;
  bad.cutmix_minmax = {{0.9, 0.1}};
  CHECK_THROWS_WITH_AS(check_mix_options(bad), doctest::Contains("minmax"), ArgumentError);
  CHECK(parse_mix_mode("pair") == MixMode::kPair);
  CHECK_FALSE(parse_mix_mode("rows").has_value());
}
