// make-shards --restart-markers on the members of a sample read from a
// shard (--from-shards): its JPEGs rewritten by imaging's
// with_restart_markers, every other member kept as it is.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensorcom/formats/shard_reader.h"

namespace make_shards {

// Rewrites the sample's JPEG members (told by their bytes, as the servers
// tell them) in place. Returns, per member, why it was left as it was
// (nothing for the rewritten and the non-JPEG).
[[nodiscard]] std::vector<std::optional<std::string>> add_restart_markers(
    std::vector<tensorcom::formats::ShardMember>& members);

}  // namespace make_shards
