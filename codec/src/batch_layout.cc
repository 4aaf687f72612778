#include "tensorcom/codec/batch_layout.h"

#include <cmath>
#include <string>

#include "tensorcom/codec/error.h"

namespace tensorcom {

namespace {

constexpr ImageLayout kLayouts[] = {ImageLayout::kBHWC, ImageLayout::kBCHW, ImageLayout::kBHW};

bool equals_lower(std::string_view upper, std::string_view text) noexcept {
  if (upper.size() != text.size()) return false;
  for (std::size_t i = 0; i < upper.size(); ++i) {
    if (text[i] != upper[i] - 'A' + 'a') return false;
  }
  return true;
}

void check_values(std::span<const float> values) {
  if (values.empty() || values.size() > kMaxChannels) {
    throw ArgumentError("mean and std need 1 to " + std::to_string(kMaxChannels) + " values, not " +
                        std::to_string(values.size()));
  }
}

// The value of channel c: the only one, or the c-th.
float value_for(std::span<const float> values, std::size_t c, std::size_t channels, const char* name) {
  if (values.size() == 1) return values[0];
  if (values.size() != channels) {
    throw ArgumentError(std::string(name) + " has " + std::to_string(values.size()) + " values for " +
                        std::to_string(channels) + " channels");
  }
  return values[c];
}

}  // namespace

std::string_view layout_name(ImageLayout layout) noexcept {
  switch (layout) {
    case ImageLayout::kBHWC: return "BHWC";
    case ImageLayout::kBCHW: return "BCHW";
    case ImageLayout::kBHW: return "BHW";
  }
  return "?";
}

std::optional<ImageLayout> parse_layout(std::string_view name) noexcept {
  for (ImageLayout layout : kLayouts) {
    if (name == layout_name(layout) || equals_lower(layout_name(layout), name)) return layout;
  }
  return std::nullopt;
}

void check_mean_std(std::span<const float> mean, std::span<const float> std) {
  check_values(mean);
  check_values(std);
  for (float s : std) {
    if (!(s != 0.0f) || !std::isfinite(s)) throw ArgumentError("std " + std::to_string(s) + " is zero or not finite");
  }
}

ChannelAffine channel_affine(std::span<const float> mean, std::span<const float> std, std::size_t channels) {
  check_mean_std(mean, std);
  if (channels < 1 || channels > kMaxChannels) {
    throw ArgumentError(std::to_string(channels) + " channels: images have 1 to " + std::to_string(kMaxChannels));
  }
  ChannelAffine affine;
  for (std::size_t c = 0; c < channels; ++c) {
    // (x / 255 - mean) / std == x * scale + bias
    const float m = value_for(mean, c, channels, "mean"), s = value_for(std, c, channels, "std");
    affine.scale[c] = 1.0f / (255.0f * s);
    affine.bias[c] = -m / s;
  }
  return affine;
}

}  // namespace tensorcom
