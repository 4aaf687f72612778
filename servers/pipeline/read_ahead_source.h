// A SampleSource that reads the next few units on threads of their own
// while the reader takes the current one. A shard fetched from elsewhere
// (an http(s) URL, a pipe: command such as curl) spends most of its time
// waiting on the far side: reading several at once hides that wait, and a
// slow or stalled shard holds back only its own samples while the
// transfers of the shards after it go on (each within its minimum rate and
// total-time bounds, formats/shard_reader.h).
//
// The reader still gets the samples in the epoch's order, unit by unit, so
// the stream is the one it would be without reading ahead. Memory: the
// samples read ahead are held within Options::bytes in all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "sample_source.h"

namespace tensorcom::pipeline {

class ReadAheadSource final : public SampleSource {
 public:
  struct Options {
    std::size_t units = 3;                          // units read ahead of the current one
    std::uint64_t bytes = std::uint64_t{64} << 20;  // samples held for them, in all
  };

  // inner: read ahead only for the units it says are remote; must outlive this.
  ReadAheadSource(SampleSource& inner, Options options);
  // Ends the reading ahead: its threads stop at their next sample.
  ~ReadAheadSource() override;
  ReadAheadSource(const ReadAheadSource&) = delete;
  ReadAheadSource& operator=(const ReadAheadSource&) = delete;

  [[nodiscard]] std::size_t units() const noexcept override { return inner_.units(); }
  [[nodiscard]] const char* unit_name() const noexcept override { return inner_.unit_name(); }
  [[nodiscard]] std::string unit_label(std::size_t unit) const override { return inner_.unit_label(unit); }
  [[nodiscard]] bool is_remote(std::size_t unit) const override { return inner_.is_remote(unit); }
  [[nodiscard]] ByteBuffer read_image(const RawSample& sample) const override { return inner_.read_image(sample); }

  // Starts reading the first remote units of `upcoming` (after its front,
  // which is read next) and abandons what was read ahead for units no
  // longer coming.
  void will_read(std::span<const std::size_t> upcoming, bool images_later) override;
  // The samples read ahead for `unit`, then the rest as they come; a unit
  // not read ahead is read here, as the inner source reads it.
  [[nodiscard]] std::optional<std::string> read(std::size_t unit, const std::function<bool(RawSample)>& take,
                                                bool images_later, const std::function<bool()>& abandoned) override;

  // Units being read ahead now (for tests).
  [[nodiscard]] std::size_t reading_ahead() const noexcept { return ahead_.size(); }

 private:
  class Unit;

  SampleSource& inner_;
  Options options_;
  std::map<std::size_t, std::unique_ptr<Unit>> ahead_;  // by unit; touched by the reader's thread only
};

}  // namespace tensorcom::pipeline
