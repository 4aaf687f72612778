// The vocabulary of image batches, shared by the servers, the tools, the GPU
// feeder and the bindings: how a tensor lays out a batch of images, and the
// normalisation (x / 255 - mean[c]) / std[c] that turns uint8 pixels into
// floats. Half precision conversion is in half.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "tensorcom/codec/channel_affine.h"

namespace tensorcom {

// How a tensor holds a batch of images: B images of H rows, W columns and C
// channels. (PyTorch says N for B: NCHW is kBCHW, NHWC is kBHWC.)
enum class ImageLayout : std::uint8_t {
  kBHWC,  // channels last: what decoders produce (NumPy, TensorFlow; the reference's)
  kBCHW,  // channels first, one plane a channel (PyTorch's default)
  kBHW,   // greyscale without a channel dimension
};

// Returns: "BHWC", "BCHW" or "BHW".
[[nodiscard]] std::string_view layout_name(ImageLayout layout) noexcept;

// Returns: the layout layout_name() spells `name`, in upper or lower case
//   ("BCHW" or "bchw"), or nothing.
[[nodiscard]] std::optional<ImageLayout> parse_layout(std::string_view name) noexcept;

// Throws: ArgumentError (saying which) unless mean and std each hold 1 to
//   kMaxChannels values and every std value is finite and not zero.
void check_mean_std(std::span<const float> mean, std::span<const float> std);

// Returns: the affine map equal to (x / 255 - mean[c]) / std[c] for each of
//   `channels` channels. mean and std hold one value for every channel, or
//   one per channel.
// Throws: ArgumentError (saying which) as check_mean_std, or if channels is
//   not 1 to kMaxChannels, or mean or std has neither 1 nor `channels` values.
[[nodiscard]] ChannelAffine channel_affine(std::span<const float> mean, std::span<const float> std,
                                           std::size_t channels);

}  // namespace tensorcom
