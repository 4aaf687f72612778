// A server's part of a resume token (docs/deploy.md, "Resuming"): the JSON
// that trainers write with their checkpoint (tensorcom.Connection's
// state_dict(), merged over the ranks): per stream, the epochs wholly
// consumed and the batches consumed of the others, as ranges.
//   {"format": "tensorcom-resume", "version": 1, "epoch": E,
//    "streams": {"0/4": {"fingerprint": "0123456789abcdef", "seed": 0, "complete": 3,
//                        "epochs": {"3": {"consumed": [[0, 17], [20, 21]], "batches": 156}}}}}
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tensorcom::pipeline {

// Half-open batch ranges [first, second), sorted and disjoint.
using BatchRanges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

struct StreamResume {
  std::uint64_t first_epoch = 0;                  // every epoch before it was consumed
  std::map<std::uint64_t, BatchRanges> consumed;  // of the epochs from first_epoch on
  bool stream_found = true;                       // false: the token did not name this stream
  std::uint64_t seed = 0;                         // the stream's seed, as the token has it

  [[nodiscard]] bool consumed_batch(std::uint64_t epoch, std::uint64_t batch) const;
  [[nodiscard]] std::uint64_t consumed_batches(std::uint64_t epoch) const;
};

// What the token must agree with: the serving stream's identity.
struct StreamIdentity {
  std::string stream;       // "RANK/WORLD", or the --stream name
  std::string fingerprint;  // stream_fingerprint()
  std::uint64_t seed = 0;
  std::uint64_t epoch_batches = 0;  // 0: not known in advance
  // The seed was drawn, not given: the token's stream entry says it, and
  // seed and fingerprint are not checked (the caller reads the token again
  // with the identity that seed makes).
  bool seed_from_token = false;
};

// What decides a stream's batches, as 16 hex digits (FNV-1a, 64 bits): two
// servers agree on it exactly when they serve the same samples in the same
// batches.
struct StreamRecipe {
  std::uint64_t seed = 0;
  std::uint64_t rank = 0;
  std::uint64_t world = 1;
  std::uint64_t batch_size = 0;
  std::uint64_t epoch_batches = 0;
  std::uint64_t shuffle_buffer = 0;
  bool shuffle_units = true;
  bool with_replacement = false;
  std::uint64_t repeats = 1;       // repeated augmentation's (in the hash only when > 1)
  std::vector<std::string> units;  // shards or files, in order
};
[[nodiscard]] std::string stream_fingerprint(const StreamRecipe& recipe);

// FNV-1a (64 bits) of bytes, continuing from hash: stable across builds,
// where std::hash is not promised to be.
inline constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
[[nodiscard]] std::uint64_t fnv1a(std::string_view bytes, std::uint64_t hash = kFnvOffset) noexcept;

// Parses a token's text; `source` names it in errors. Throws ArgumentError,
// one line naming the field and what is wrong with it, for a token that is
// malformed, too large, or disagrees with `identity` (another seed, shard
// list, batch size or --epoch-batches).
[[nodiscard]] StreamResume parse_resume_token(std::string_view text, std::string_view source,
                                              const StreamIdentity& identity);
// Reads and parses a token file (at most 64 MiB).
[[nodiscard]] StreamResume read_resume_token(const std::string& path, const StreamIdentity& identity);

}  // namespace tensorcom::pipeline
