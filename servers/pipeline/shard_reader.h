// Reads webdataset tar shards (plain or compressed, ustar/GNU/pax) and groups
// their members into samples exactly as webdataset does: the key is a
// member's path up to the first dot of its base name, the extension the
// rest; consecutive members with one key form a sample. Directories, links
// and members of other extensions are passed over.
//
// A shard is named by a path, "file:PATH", or "pipe:COMMAND" (the standard
// output of `/bin/sh -c COMMAND`, e.g. "pipe:curl -s URL").
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "raw_sample.h"

struct archive;
struct archive_entry;

namespace tensorcom::pipeline {

struct ShardReaderOptions {
  std::size_t max_member_bytes = std::size_t{256} << 20;  // larger members are skipped
  int pipe_attempts = 3;                                  // tries of a failing pipe: command
};

class ShardReader {
 public:
  // Throws IoError if the shard cannot be opened (after the attempts, for pipes).
  explicit ShardReader(std::string shard, ShardReaderOptions options = {});
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  // The next sample, or nothing at the end of the shard. A shard that ends
  // early (truncated, corrupt, a failing command) ends here too, with
  // error() saying why; samples completed before that point are returned.
  [[nodiscard]] std::optional<RawSample> next();
  [[nodiscard]] const std::optional<std::string>& error() const noexcept { return error_; }
  // Members skipped for being larger than max_member_bytes.
  [[nodiscard]] std::uint64_t oversized_members() const noexcept { return oversized_; }

 private:
  class Source;  // the archive handle and, for pipes, the child process
  void open();
  bool end_abnormally(const std::string& reason);
  std::optional<RawSample> end_cleanly();
  // Reads members until the key changes; returns the completed sample, if any.
  std::optional<RawSample> read_until_next_key();
  // extension: the member's, lowercased.
  bool add_member(::archive_entry* entry, const std::string& extension, RawSample& sample);

  std::string shard_;
  ShardReaderOptions options_;
  std::unique_ptr<Source> source_;
  std::optional<RawSample> pending_;
  std::optional<std::string> error_;
  std::uint64_t delivered_ = 0;  // samples returned to the caller over all attempts
  std::uint64_t position_ = 0;   // samples read in this attempt; the first delivered_ are skipped
  int attempts_ = 0;
  std::uint64_t oversized_ = 0;
  bool done_ = false;
};

// Splits a member path into (key, extension) as webdataset does:
// "a/b.c/n01.tar.jpg" -> ("a/b.c/n01", "tar.jpg"). A base name without a dot
// gives an empty extension.
[[nodiscard]] std::pair<std::string, std::string> split_member_name(const std::string& path);

}  // namespace tensorcom::pipeline
