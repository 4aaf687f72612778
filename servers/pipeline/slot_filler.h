// A worker of an image server: fills each dispatched sample's batch slot by
// decoding and augmenting it or, when it cannot be served (no image, a bad
// label, undecodable, too large), from the nearest of its candidates that
// can; a slot nothing can fill is left empty. The slot's place, not the
// sample's, draws the augmentation, so a replacement is cut as the sample it
// replaces would have been. One SlotFiller per worker thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "batch_assembler.h"
#include "batch_format.h"
#include "sample_source.h"
#include "sample_window.h"
#include "server_counters.h"
#include "server_log.h"
#include "stage_clock.h"
#include "tensorcom/imaging/augmenter.h"

namespace tensorcom::pipeline {

struct FillerOptions {
  imaging::AugmentOptions augment;
  std::uint64_t seed = 0;  // with a slot's place, draws its augmentation
  std::size_t batch_size = 1;
  std::int32_t classes = 0;                                  // labels must be below this (0: any non-negative int32)
  std::uint64_t max_image_bytes = std::uint64_t{256} << 20;  // for the message about a sample passed over for it
  bool image_bytes_fit_memory = false;                       // it was lowered to fit --memory-limit
  int first_size = 224;                                      // the first epoch's image size
  BatchFormat largest;                                       // the format at the largest size served
};

class SlotFiller {
 public:
  SlotFiller(const FillerOptions& options, BatchAssembler& assembler, const SampleSource& source,
             ServerCounters& counters, WorkerClocks& clocks);
  SlotFiller(const SlotFiller&) = delete;
  SlotFiller& operator=(const SlotFiller&) = delete;
  // Adds this worker's JPEG counts to the counters.
  ~SlotFiller();

  // Fills the slot of dispatched.sample: from it, or from its nearest
  // candidate that can be served, or leaves it empty.
  void serve(const Dispatched& dispatched);

 private:
  // Why a sample cannot be served.
  struct Refusal {
    imaging::Problem problem;
    std::string detail;
  };
  // The sample's label, or why it cannot be served.
  [[nodiscard]] std::variant<std::int32_t, Refusal> label_of_sample(const RawSample& sample) const;
  // Decodes and augments `sample` into `slot` with the slot's random draws;
  // why not, if it cannot.
  std::optional<Refusal> fill(const SampleSlot& slot, const RawSample& sample);
  // The bytes of the sample's image (read now if it was listed unread).
  const ByteBuffer& image_of(const RawSample& sample);
  // Makes the augmenter's output size x size (a new epoch's size).
  void resize(int size);
  void count_jpegs();

  const FillerOptions& options_;
  BatchAssembler& assembler_;
  const SampleSource& source_;
  ServerCounters& counters_;
  WorkerClocks& clocks_;
  imaging::ImageAugmenter augmenter_;
  std::vector<std::uint8_t> scratch_;  // the output, where the batch's memory is not uint8 HWC
  ByteBuffer later_;                   // the image a resumed epoch left for this worker to read
};

}  // namespace tensorcom::pipeline
