#include "slot_filler.h"

#include "sample_label.h"
#include "sample_order.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/formats/printable.h"

namespace tensorcom::pipeline {

using Clock = StageClock::Clock;

SlotFiller::SlotFiller(const FillerOptions& options, BatchAssembler& assembler, const SampleSource& source,
                       ServerCounters& counters, WorkerClocks& clocks)
    : options_(options),
      assembler_(assembler),
      source_(source),
      counters_(counters),
      clocks_(clocks),
      augmenter_(options.augment, options.first_size),
      scratch_(options.largest.direct() ? 0 : options.largest.image_bytes()) {}

SlotFiller::~SlotFiller() { count_jpegs(); }

void SlotFiller::serve(const Dispatched& dispatched) {
  const RawSample& sample = *dispatched.sample;
  const std::size_t batch_size = options_.batch_size;
  const SampleSlot slot = assembler_.slot({sample.epoch, sample.position / batch_size}, sample.position % batch_size);
  resize(slot.format->size);
  const std::optional<Refusal> refusal = fill(slot, sample);
  if (!refusal) return;
  counters_.skips().skip(refusal->problem, sample.key, sample.shard, refusal->detail);
  for (const SharedSample& candidate : dispatched.candidates) {
    if (fill(slot, *candidate)) continue;
    counters_.count_replaced(refusal->problem);
    return;
  }
  counters_.count_unfilled("epoch " + std::to_string(sample.epoch) + ": none of the " +
                           std::to_string(dispatched.candidates.size()) + " samples nearest " +
                           formats::printable(sample.key) + " could replace it; its batch is sent one short");
  assembler_.leave_empty(slot);
}

std::variant<std::int32_t, SlotFiller::Refusal> SlotFiller::label_of_sample(const RawSample& sample) const {
  using imaging::Problem;
  if (sample.unreadable) return Refusal{Problem::kUnreadableFile, *sample.unreadable};
  if (sample.oversized_image) {
    return Refusal{Problem::kTooLarge,
                   "image of " + std::to_string(sample.oversized_image) + " bytes; the limit is " +
                       std::to_string(options_.max_image_bytes) +
                       (options_.image_bytes_fit_memory ? " (what --memory-limit leaves an image)" : "")};
  }
  const Label label = label_of(sample, options_.classes);
  if (label.problem) return Refusal{*label.problem, label.detail};
  if (!sample.image && !sample.image_offset) return Refusal{Problem::kNoImage, ""};
  if (sample.image ? sample.image->empty() : sample.image_bytes == 0) return Refusal{Problem::kEmpty, ""};
  return label.value;
}

std::optional<SlotFiller::Refusal> SlotFiller::fill(const SampleSlot& slot, const RawSample& sample) {
  const auto label = label_of_sample(sample);
  if (const Refusal* refusal = std::get_if<Refusal>(&label)) return *refusal;
  const std::uint64_t position = slot.batch.index * options_.batch_size + slot.index;
  auto rng = sample_rng(options_.seed, (slot.batch.epoch << 40) | position);
  const Clock::time_point start = Clock::now();
  const Clock::duration decoded_before = augmenter_.decode_time();
  // Timed whether the sample is kept or not: a bad image costs time too.
  auto time_sample = [&] {
    const Clock::duration decoding = augmenter_.decode_time() - decoded_before;
    clocks_.decode.add(decoding);
    clocks_.augment.add(Clock::now() - start - decoding);
  };
  try {
    augmenter_.augment(image_of(sample), rng, slot.direct ? slot.direct : scratch_.data());
  } catch (const IoError& e) {
    time_sample();
    return Refusal{imaging::Problem::kUnreadableFile, e.what()};
  } catch (const imaging::ImageError& e) {
    time_sample();
    return Refusal{e.problem(), e.what()};
  } catch (const std::exception& e) {
    time_sample();
    return Refusal{imaging::Problem::kUndecodable, e.what()};
  }
  assembler_.commit(slot, scratch_.data(), std::get<std::int32_t>(label), sample.key, sample.shard,
                    augmenter_.last_geometry());
  time_sample();
  return std::nullopt;
}

const ByteBuffer& SlotFiller::image_of(const RawSample& sample) {
  if (sample.image) return *sample.image;
  later_ = source_.read_image(sample);
  return later_;
}

void SlotFiller::resize(int size) {
  if (augmenter_.output().width == size) return;
  count_jpegs();  // a new augmenter counts from zero
  augmenter_ = imaging::ImageAugmenter(options_.augment, size);
}

void SlotFiller::count_jpegs() {
  const auto counts = augmenter_.jpeg_counts();
  counters_.add_jpegs(counts.sliced, counts.total);
}

}  // namespace tensorcom::pipeline
