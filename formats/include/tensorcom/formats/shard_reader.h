// Reads webdataset tar shards (plain or compressed, ustar/GNU/pax) sample by
// sample, grouping members exactly as webdataset does (webdataset.h's
// split_member_name): consecutive members with one key form a sample.
// Directories, links and members without a key are passed over and counted.
//
// A shard is named by a path, "file:PATH", or "pipe:COMMAND" (the standard
// output of `/bin/sh -c COMMAND`, e.g. "pipe:curl -s URL").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorcom/formats/file_io.h"

namespace tensorcom::formats {

struct ShardMember {
  std::string name;        // the path in the tar
  std::string extension;   // lowercased: everything after the first dot of the base name
  ByteBuffer data;         // the member's bytes; empty when oversized
  std::uint64_t size = 0;  // as the tar header declares it
  bool oversized = false;  // larger than max_member_bytes: passed over unread
};

struct ShardSample {
  std::string key;                   // webdataset key
  std::vector<ShardMember> members;  // the members read, in shard order
};

struct ShardReaderOptions {
  std::uint64_t max_member_bytes = std::uint64_t{256} << 20;  // larger members are listed oversized, unread
  int pipe_attempts = 3;                                      // tries of a failing pipe: command
  // Which members of a sample to read, given the sample so far and the
  // member's extension; the others are passed over unread (and not listed).
  // Empty: every member.
  std::function<bool(const ShardSample& so_far, std::string_view extension)> wanted;
  // Polled while waiting on a pipe: command's output (every 100 ms): true
  // ends the shard at once with error() "stopped", ends the command (SIGTERM
  // to its process group, SIGKILL a second later) and never starts it again.
  std::function<bool()> cancelled;
};

// Not thread-safe; one reader per shard.
class ShardReader {
 public:
  // Throws IoError naming the shard if it cannot be opened (for pipes: the
  // command cannot be started).
  explicit ShardReader(std::string shard, ShardReaderOptions options = {});
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  // The next sample, or nothing at the end of the shard. A shard that ends
  // early (truncated, corrupt, a failing command) ends here too, with
  // error() saying why; samples completed before that point are returned,
  // the one it cut is not. A failing pipe: command is started again (up to
  // pipe_attempts times) and the samples it already gave are not repeated.
  [[nodiscard]] std::optional<ShardSample> next();
  [[nodiscard]] const std::optional<std::string>& error() const noexcept { return error_; }
  [[nodiscard]] const std::string& shard() const noexcept { return shard_; }
  // Members listed oversized.
  [[nodiscard]] std::uint64_t oversized_members() const noexcept { return oversized_; }
  // Members passed over for not being regular files or having no key.
  [[nodiscard]] std::uint64_t keyless_members() const noexcept { return keyless_; }

 private:
  class Source;  // the archive handle and, for pipes, the child process
  void open();
  bool end_abnormally(const std::string& reason);
  std::optional<ShardSample> end_cleanly();
  // Reads members until the key changes; returns the completed sample, if any.
  std::optional<ShardSample> read_until_next_key();
  // Reads or passes over the current member; false if the archive ends inside it.
  bool add_member(const std::string& name, std::string extension, std::uint64_t size, ShardSample& sample);

  std::string shard_;
  ShardReaderOptions options_;
  std::unique_ptr<Source> source_;
  std::optional<ShardSample> pending_;
  std::optional<std::string> error_;
  std::uint64_t delivered_ = 0;  // samples returned to the caller over all attempts
  std::uint64_t position_ = 0;   // samples read in this attempt; the first delivered_ are skipped
  int attempts_ = 0;
  std::uint64_t oversized_ = 0;
  std::uint64_t keyless_ = 0;
  bool done_ = false;
};

}  // namespace tensorcom::formats
