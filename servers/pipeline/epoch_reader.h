// The reader of an image server: walks each epoch's units (shards or files)
// in the epoch's order through a shuffle buffer, gives every sample its
// place (epoch, position), holds back the samples read after each one so
// that its replacements are read before it is decoded, and hands samples
// to the workers with those candidates, opening each batch first. A resumed
// epoch passes over the samples of the batches its token says were consumed.
// Runs on one thread; its outputs go to a ReaderOutput.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "batch_assembler.h"
#include "resume_token.h"
#include "sample_order.h"
#include "sample_source.h"
#include "sample_window.h"
#include "server_counters.h"
#include "server_log.h"
#include "stage_clock.h"

namespace tensorcom::pipeline {

// Where the reader's samples go: the batch assembler and the workers' queue
// in a server, a recorder in tests.
class ReaderOutput {
 public:
  virtual ~ReaderOutput() = default;
  // Opens the batch at `place` for `expected` samples of size x size pixels,
  // before its first sample is dispatched. False: serving ends.
  virtual bool open_batch(BatchPlace place, std::size_t expected, int size) = 0;
  // The open batch at `place` holds `count` samples and ends its epoch;
  // called before its last sample is dispatched.
  virtual void end_epoch_at(BatchPlace place, std::size_t count) = 0;
  // Hands a sample, with the samples that may replace it, to a worker.
  // False: serving ends.
  virtual bool dispatch(Dispatched dispatched) = 0;
};

struct ReaderOptions {
  OrderOptions order;                 // the epochs' unit order and the seed
  std::size_t shuffle_buffer = 1000;  // samples mixed across units (0: none)
  std::size_t batch_size = 1;
  std::uint64_t epochs = 0;         // 0: forever
  std::uint64_t epoch_batches = 0;  // samples an epoch takes, in batches (EpochQuota); 0: the share
  std::uint64_t epoch_samples = 0;  // without epoch_batches: samples an epoch takes (0: the share)
  // Bytes of encoded samples the reader holds: the shuffle buffer 3/4 of
  // it, each of the two sample windows 1/8.
  std::uint64_t memory_limit = std::uint64_t{1} << 30;
  StreamResume resume;                        // batches consumed before a resume
  std::function<int(std::uint64_t)> size_at;  // each epoch's image size
  bool announce_sizes = false;                // say each epoch's size when it changes (--size-schedule)
};

class EpochReader {
 public:
  // stop_requested: polled between samples; true ends reading.
  EpochReader(ReaderOptions options, SampleSource& source, ReaderOutput& output, ServerCounters& counters,
              const ServerLog& log, std::function<bool()> stop_requested);

  // Reads every epoch (from the resume's first) until done, stopped, or an
  // epoch finds no sample to serve (then failed()).
  void read_all();
  // Reads one epoch; false if serving ends (a stop, an output refusing, an
  // epoch without samples).
  bool read_epoch(std::uint64_t epoch);
  // An epoch found no sample: serving it forever would only spin.
  [[nodiscard]] bool failed() const noexcept { return failed_; }

 private:
  bool read_unit(std::size_t unit, ShuffleBuffer<RawSample>& buffer, EpochQuota& quota);
  bool place(RawSample sample);
  bool dispatch(bool last);
  void clock_reading();
  void say_size(std::uint64_t epoch);
  void say_quota(std::uint64_t epoch, const EpochQuota& quota, std::size_t passes) const;
  void say_resumed(std::uint64_t epoch) const;
  [[nodiscard]] bool stopping() const { return stop_requested_ && stop_requested_(); }

  ReaderOptions options_;
  SampleSource& source_;
  ReaderOutput& output_;
  ServerCounters& counters_;
  const ServerLog& log_;
  std::function<bool()> stop_requested_;
  std::uint64_t reading_epoch_ = 0;
  std::uint64_t placed_ = 0;   // samples of the epoch given their place so far
  bool images_later_ = false;  // a resumed epoch: images are read by the workers that decode them
  // The samples read and not yet handed over (so that a failed sample's
  // replacements are read before it is decoded) and the last ones handed
  // over (replacements for those at the epoch's end); each within
  // SampleWindow::kWindow samples and an eighth of the memory limit.
  SampleWindow held_back_;
  SampleWindow handed_over_;
  int last_size_ = 0;
  bool failed_ = false;
  StageClock::Clock::time_point read_mark_{};  // when the current stretch of reading began
};

}  // namespace tensorcom::pipeline
