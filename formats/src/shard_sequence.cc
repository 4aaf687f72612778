#include "tensorcom/formats/shard_sequence.h"

#include <utility>

#include "tensorcom/formats/printable.h"

namespace tensorcom::formats {

ShardSequence::ShardSequence(std::vector<std::string> paths, ShardReaderOptions options,
                             std::function<void(std::string_view)> warn)
    : paths_(std::move(paths)), options_(std::move(options)), warn_(std::move(warn)) {}

std::optional<ShardSequence::Sample> ShardSequence::next() {
  for (;;) {
    if (shard_) {
      if (auto sample = shard_->next()) {
        if (!has_oversized_member(*sample)) return Sample{shard_->shard(), std::move(sample->members)};
        continue;
      }
      close_shard();
    }
    if (at_ == paths_.size()) return std::nullopt;
    shard_.emplace(paths_[at_++], options_);
  }
}

bool ShardSequence::has_oversized_member(const ShardSample& sample) {
  for (const ShardMember& member : sample.members) {
    if (!member.oversized) continue;
    if (warn_) {
      warn_(printable(shard_->shard()) + ": sample " + printable(sample.key) + " left out: member " +
            printable(member.name) + " has " + std::to_string(member.size) + " bytes; the limit is " +
            std::to_string(options_.max_member_bytes) + " (--max-member-bytes)");
    }
    ++counts_.oversized_samples;
    return true;
  }
  return false;
}

void ShardSequence::close_shard() {
  counts_.skipped_members += shard_->keyless_members();
  if (shard_->error()) {
    ++counts_.damaged_shards;
    if (warn_) {
      warn_("shard ended early, samples after the damage lost: " + printable(shard_->shard()) + ": " +
            printable(*shard_->error()));
    }
  }
  shard_.reset();
}

}  // namespace tensorcom::formats
