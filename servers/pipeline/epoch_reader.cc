#include "epoch_reader.h"

#include <algorithm>
#include <iterator>
#include <new>
#include <span>
#include <utility>

namespace tensorcom::pipeline {

EpochReader::EpochReader(ReaderOptions options, SampleSource& source, ReaderOutput& output, ServerCounters& counters,
                         const ServerLog& log, std::function<bool()> stop_requested)
    : options_(std::move(options)),
      source_(source),
      output_(output),
      counters_(counters),
      log_(log),
      stop_requested_(std::move(stop_requested)),
      held_back_(options_.memory_limit / 8),
      handed_over_(options_.memory_limit / 8) {}

void EpochReader::read_all() {
  for (std::uint64_t epoch = options_.resume.first_epoch; options_.epochs == 0 || epoch < options_.epochs; ++epoch) {
    if (!read_epoch(epoch)) return;
  }
}

// One pass over the epoch's order: every sample placed and dispatched. A
// resumed epoch lists its images where they lie instead of reading them:
// the consumed batches' samples are placed and never read, the others read
// by the worker that decodes them (a compressed or streamed shard, whose
// images cannot be found again, is read as usual; its consumed samples are
// still not decoded).
bool EpochReader::read_epoch(std::uint64_t epoch) {
  say_size(epoch);
  images_later_ = options_.resume.consumed_batches(epoch) > 0;
  reading_epoch_ = epoch;
  placed_ = 0;
  ShuffleBuffer<RawSample> buffer(options_.shuffle_buffer, seeded_rng({options_.order.seed, epoch, 3}),
                                  options_.memory_limit / 4 * 3, buffered_bytes);
  EpochQuota quota(options_.epoch_batches ? options_.epoch_batches * options_.batch_size : options_.epoch_samples);
  const std::vector<std::size_t> units = epoch_units(source_.units(), epoch, options_.order);
  std::size_t passes = 0;
  for (bool again = true; again; ++passes) {
    const std::uint64_t taken_before = quota.taken();
    for (std::size_t i = 0; i < units.size(); ++i) {
      source_.will_read(std::span(units).subspan(i), images_later_);
      if (!read_unit(units[i], buffer, quota)) return false;
      if (quota.full()) break;
    }
    again = quota.another_pass(taken_before);
  }
  // An epoch ends with all of its samples out: none is carried over.
  while (auto sample = buffer.drain()) {
    if (!place(std::move(*sample))) return false;
  }
  if (placed_ == 0) {
    log_.warn("epoch " + std::to_string(epoch) + " found no samples; stopping");
    failed_ = true;
    return false;
  }
  while (!held_back_.empty()) {
    if (!dispatch(held_back_.samples().size() == 1)) return false;
  }
  handed_over_.clear();
  if (options_.epoch_batches) say_quota(epoch, quota, passes);
  say_resumed(epoch);
  images_later_ = false;
  return true;
}

void EpochReader::say_size(std::uint64_t epoch) {
  const int size = options_.size_at(epoch);
  if (options_.announce_sizes && size != last_size_) {
    log_.info("epoch " + std::to_string(epoch) + ": size " + std::to_string(size) + " (--size-schedule)");
  }
  last_size_ = size;
}

void EpochReader::say_resumed(std::uint64_t epoch) const {
  const std::uint64_t consumed = options_.resume.consumed_batches(epoch);
  if (consumed == 0) return;
  log_.info("epoch " + std::to_string(epoch) + ": resumed: " + std::to_string(consumed) +
            " batches consumed before the resume were passed over, not decoded");
}

void EpochReader::say_quota(std::uint64_t epoch, const EpochQuota& quota, std::size_t passes) const {
  const std::string prefix = "epoch " + std::to_string(epoch) + ": ";
  if (passes > 1) {
    log_.info(prefix + "the share was read " + std::to_string(passes) + " times to fill --epoch-batches " +
              std::to_string(options_.epoch_batches) + " (" + std::to_string(quota.taken()) +
              " samples): its first samples were repeated");
  } else if (quota.cut()) {
    log_.info(prefix + "--epoch-batches " + std::to_string(options_.epoch_batches) + " filled after " +
              std::to_string(quota.taken()) + " samples; the rest of the share is left out this epoch");
  }
}

bool EpochReader::read_unit(std::size_t unit, ShuffleBuffer<RawSample>& buffer, EpochQuota& quota) {
  bool stopped = false;
  auto pass_on = [&](RawSample sample) {
    sample.unit = unit;
    if (!quota.take()) return false;
    auto out = buffer.add(std::move(sample));
    stopped = stopping() || (out && !place(std::move(*out)));
    while (!stopped) {
      auto excess = buffer.take_excess();
      if (!excess) break;
      stopped = !place(std::move(*excess));
    }
    return !stopped;
  };
  std::optional<std::string> problem;
  read_mark_ = StageClock::Clock::now();
  try {
    problem = source_.read(unit, pass_on, images_later_);
  } catch (const std::bad_alloc&) {
    // One shard's failure ends that shard only; what it gave is served.
    problem = source_.unit_label(unit) + " abandoned: out of memory while reading it";
  } catch (const std::exception& e) {
    problem = source_.unit_label(unit) + " abandoned: " + e.what();
  }
  clock_reading();
  if (problem) counters_.count_shard_error(*problem);
  return !stopped && !stopping();
}

// Adds the reading time since read_mark_ to the read stage.
void EpochReader::clock_reading() {
  const auto now = StageClock::Clock::now();
  counters_.read_clock().add(now - read_mark_);
  read_mark_ = now;
}

// Gives the sample its place in the epoch's order and holds it back until
// the samples after it are read (its replacements, should it fail).
bool EpochReader::place(RawSample sample) {
  sample.epoch = reading_epoch_;
  sample.position = placed_++;
  // Waiting for the workers is not reading: the clock pauses meanwhile.
  clock_reading();
  held_back_.push(std::make_shared<const RawSample>(std::move(sample)));
  bool ok = true;
  while (ok && held_back_.over()) ok = dispatch(false);
  read_mark_ = StageClock::Clock::now();
  return ok;
}

// Hands the oldest held-back sample to the workers, opening its batch first
// (unless a resume token says its batch was consumed: then it is not decoded).
bool EpochReader::dispatch(bool last) {
  Dispatched d{held_back_.pop(), {}};
  const std::uint64_t batch_size = options_.batch_size;
  const BatchPlace place{d.sample->epoch, d.sample->position / batch_size};
  const std::size_t index = d.sample->position % batch_size;
  const bool consumed = options_.resume.consumed_batch(place.epoch, place.index);
  if (!consumed) {
    const auto& after = held_back_.samples();
    const auto& before = handed_over_.samples();
    auto servable = [](const SharedSample& s) { return may_be_servable(*s); };
    std::copy_if(after.begin(), after.end(), std::back_inserter(d.candidates), servable);
    std::copy_if(before.rbegin(), before.rend(), std::back_inserter(d.candidates), servable);
  }
  handed_over_.push(d.sample);
  while (handed_over_.over()) handed_over_.pop();
  if (consumed) {
    counters_.count_replayed();
    return !stopping();
  }
  if (index == 0 && !output_.open_batch(place, batch_size, options_.size_at(place.epoch))) return false;
  if (last) output_.end_epoch_at(place, index + 1);
  return output_.dispatch(std::move(d));
}

}  // namespace tensorcom::pipeline
