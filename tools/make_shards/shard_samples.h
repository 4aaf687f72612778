// Reading webdataset samples back from tar shards, to re-pack them:
// consecutive regular-file members with one key (the path up to the first
// dot of the base name) form a sample, every member kept as it is. Members
// whose base name has no dot have no key; webdataset passes them over, and
// so does this (they are counted).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "file_io.h"

namespace make_shards {

struct ShardMember {
  std::string name;  // the path in the tar
  Bytes data;
};

// Returns the webdataset key of a member path, or nothing when its base
// name has no dot.
[[nodiscard]] std::optional<std::string> member_key(const std::string& path);

// One tar shard (plain or compressed, any tar flavour libarchive reads), read
// sample by sample. Move-only; not thread-safe.
class ShardSamples {
 public:
  // Throws tensorcom::IoError naming path if it cannot be opened.
  explicit ShardSamples(const std::string& path);
  ShardSamples(ShardSamples&&) noexcept;
  ShardSamples& operator=(ShardSamples&&) noexcept;
  ~ShardSamples();

  // The next sample's members in their order; nothing at the end of the
  // shard, or where it is damaged (then error() says why).
  [[nodiscard]] std::optional<std::vector<ShardMember>> next();
  // Why reading stopped early, naming the shard; nothing if it ended cleanly.
  [[nodiscard]] const std::optional<std::string>& error() const noexcept { return error_; }
  // Members passed over: not regular files, or without a key.
  [[nodiscard]] std::uint64_t skipped_members() const noexcept { return skipped_; }

 private:
  // Reads the next regular member with a key into pending_; false at the end or on damage.
  bool read_member();

  struct Archive;
  std::unique_ptr<Archive> archive_;
  std::string path_;
  std::optional<ShardMember> pending_;  // read ahead: the first member of the next sample
  std::string pending_key_;
  std::optional<std::string> error_;
  std::uint64_t skipped_ = 0;
  bool done_ = false;
};

}  // namespace make_shards
