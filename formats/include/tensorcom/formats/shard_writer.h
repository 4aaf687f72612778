// Shards: numbered tar files, each closed when the next sample would pass its
// sample-count or byte limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorcom/codec/atomic_file.h"
#include "tensorcom/formats/file_io.h"

namespace tensorcom::formats {

// An output path pattern with one printf integer conversion, such as
// "shards/imagenet-train-%06d.tar".
class ShardPattern {
 public:
  // Accepts exactly one %d, %i or %u conversion, with optional flags among
  // "0-+ " and a width; "%%" stands for '%'. Throws ArgumentError
  // naming the pattern otherwise.
  explicit ShardPattern(const std::string& pattern);

  // Returns the pattern with shard in place of the conversion, as printf would.
  [[nodiscard]] std::string format(std::uint64_t shard) const;

 private:
  std::string prefix_;  // text before the conversion, "%%" already turned into '%'
  std::string suffix_;  // text after it, likewise
  std::size_t width_ = 0;
  bool zero_pad_ = false;
  bool left_align_ = false;
  char sign_ = '\0';  // '+' or ' ' when that flag was given
};

struct ShardLimits {
  std::uint64_t max_count = 1000;        // samples per shard
  std::uint64_t max_bytes = 1000000000;  // file size per shard; a larger single sample still gets a shard
};

// What was written to one shard.
struct ShardSummary {
  std::string path;
  std::uint64_t samples = 0;
  std::uint64_t bytes = 0;  // the file size
};

// Writes encoded samples to shards 0, 1, ... named by the pattern. Each shard
// is an AtomicFile, so a failed run leaves no truncated shard under a final
// name. Move-only; not thread-safe.
class ShardWriter {
 public:
  ShardWriter(ShardPattern pattern, ShardLimits limits);

  // Appends one sample's tar members (a TarEncoder::encode result), first
  // completing the current shard if the sample would take it past a limit.
  // Creates the shard's folder if missing. Throws IoError.
  void add(std::span<const std::byte> sample);

  // Completes the last shard and returns every shard written, in order.
  // Throws IoError.
  [[nodiscard]] std::vector<ShardSummary> finish();

 private:
  struct OpenShard {
    AtomicFile file;
    ShardSummary summary;
  };

  [[nodiscard]] bool fits(std::size_t sample_bytes) const;
  void open_next();
  void complete_current();

  ShardPattern pattern_;
  ShardLimits limits_;
  std::optional<OpenShard> current_;
  std::vector<ShardSummary> done_;
};

}  // namespace tensorcom::formats
