// MixUp/CutMix on the servers: each complete batch is mixed in place
// before it is sent, from a draw that depends only on the stream's seed and
// name and the batch's place (epoch, index), so that a resumed or repeated
// epoch mixes its batches as the first run did. The draws go along as a
// float64 tensor (n, 7), info "mix": kind (0 none, 1 MixUp, 2 CutMix),
// partner, lambda, x0, y0, x1, y1 a sample: 56 bytes a sample, where soft
// targets would be num_classes floats (4,000 bytes for ImageNet, 4% of a
// 176 x 176 crop); the trainer makes the targets (tensorcom.imaging.mix_targets).
#pragma once

#include <cstdint>
#include <string_view>

#include "batch_assembler.h"
#include "tensorcom/codec/tensor.h"
#include "tensorcom/imaging/batch_mix.h"

namespace tensorcom::pipeline {

// The info of the draws' tensor.
inline constexpr std::string_view kMixInfo = "mix";

class BatchMixer {
 public:
  // seed: the stream's; stream: its name (ranks of one seed mix apart).
  // Throws ArgumentError for options check_mix_options refuses.
  BatchMixer(imaging::MixOptions options, std::uint64_t seed, std::string_view stream);

  // Mixes the batch's images (channels last: BHWC, else BCHW) in place;
  // returns the draws' tensor. A timm mode given an odd batch (an epoch's
  // short last batch) leaves its last image unmixed.
  [[nodiscard]] Tensor mix(AssembledBatch& batch, bool channels_last) const;

  [[nodiscard]] const imaging::MixOptions& options() const noexcept { return options_; }

 private:
  imaging::MixOptions options_;
  std::uint64_t seed_;
};

}  // namespace tensorcom::pipeline
