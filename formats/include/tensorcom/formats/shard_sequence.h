// The samples of several shards in order, one shard open at a time: a
// damaged shard is reported and ends there, the next one is opened; a
// sample with a member over the size limit is left out whole (it cannot be
// copied), with a warning naming it. For re-packing shards (make-shards
// --from-shards); the servers read through their SampleSource instead.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorcom/formats/shard_reader.h"

namespace tensorcom::formats {

class ShardSequence {
 public:
  // What was passed over.
  struct Counts {
    std::uint64_t skipped_members = 0;    // members without a key (webdataset's rules)
    std::uint64_t oversized_samples = 0;  // left out for a member over max_member_bytes
    std::uint64_t damaged_shards = 0;     // ended early by damage
  };
  // One sample and the shard it came from.
  struct Sample {
    std::string shard;
    std::vector<ShardMember> members;
  };

  // paths: the shards (already expanded), read in this order. warn gets
  // each warning line (without a newline or a program prefix); may be empty.
  ShardSequence(std::vector<std::string> paths, ShardReaderOptions options, std::function<void(std::string_view)> warn);

  // The next sample; nothing after the last shard. Throws IoError where a
  // shard cannot be opened at all (ShardReader's constructor).
  [[nodiscard]] std::optional<Sample> next();
  [[nodiscard]] const Counts& counts() const noexcept { return counts_; }

 private:
  bool has_oversized_member(const ShardSample& sample);
  void close_shard();

  std::vector<std::string> paths_;
  std::size_t at_ = 0;
  ShardReaderOptions options_;
  std::function<void(std::string_view)> warn_;
  std::optional<ShardReader> shard_;
  Counts counts_;
};

}  // namespace tensorcom::formats
