// Reads webdataset tar shards (plain or compressed, ustar/GNU/pax) sample by
// sample, grouping members exactly as webdataset does (webdataset.h's
// split_member_name): consecutive members with one key form a sample.
// Directories, links and members without a key are passed over and counted.
//
// A shard is named by a path, "file:PATH", "pipe:COMMAND" (the standard
// output of `/bin/sh -c COMMAND`, e.g. "pipe:curl -s URL"), or an "http://"
// or "https://" URL (streamed with libcurl as it is read, never held whole).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
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
  bool unread = false;     // ShardReaderOptions::listed_only asked for its size alone
  // Where its bytes start in the shard file (read_file_range reads them
  // later): known in local, uncompressed tars only.
  std::optional<std::uint64_t> offset;
};

struct ShardSample {
  std::string key;                   // webdataset key
  std::vector<ShardMember> members;  // the members read, in shard order
};

// How "http://" and "https://" shards are fetched. A transfer that fails
// (no connection, a timeout, a body cut short, HTTP 408, 429 or 5xx) is
// tried again after a back-off; other HTTP errors (404...) and redirect
// loops are not.
struct HttpShardOptions {
  int attempts = 3;                                  // tries of a failing transfer
  std::chrono::milliseconds connect_timeout{15000};  // to resolve the host and connect
  std::chrono::milliseconds stall_timeout{60000};    // at most this long without a byte of the body
  // A body that comes slower than min_bytes_per_second, over rate_window
  // of time spent waiting for it (time the reader was busy elsewhere does
  // not count), fails as a stall does: a server that drips bytes cannot
  // hold the reader for days. 0: no minimum.
  std::uint64_t min_bytes_per_second = 16 << 10;
  std::chrono::milliseconds rate_window{30000};
  // A transfer ends, failed, after this long in all, however fast it goes
  // (an endless body). 0: no bound.
  std::chrono::milliseconds max_transfer_time{3600000};
  std::chrono::milliseconds first_retry_delay{1000};  // the wait after the first failure
  std::chrono::milliseconds max_retry_delay{30000};   // the back-off doubles up to this
  int max_redirects = 10;                             // more is a failure ("too many redirects")

  // The wait after `failures` failed attempts (1, 2, ...): first_retry_delay
  // doubled after each, at most max_retry_delay.
  [[nodiscard]] std::chrono::milliseconds retry_delay(int failures) const noexcept;
};

// The bytes of a member ShardReaderOptions::keep is shown.
inline constexpr std::size_t kMemberHeadBytes = 4096;

struct ShardReaderOptions {
  std::uint64_t max_member_bytes = std::uint64_t{256} << 20;  // larger members are listed oversized, unread
  int pipe_attempts = 3;                                      // tries of a failing pipe: command
  HttpShardOptions http;                                      // for http(s) URLs
  // Which members of a sample to read, given the sample so far and the
  // member's extension; the others are passed over unread (and not listed).
  // Empty: every member.
  std::function<bool(const ShardSample& so_far, std::string_view extension)> wanted;
  // Of the members wanted, which to list with their size alone (unread,
  // data empty), their bytes passed over: a reader replaying an order
  // needs the sizes, not the bytes. With keep, the head is still read and
  // shown to it: a member keep refuses is listed with its head as usual.
  // Empty: none.
  std::function<bool(const ShardSample& so_far, std::string_view extension)> listed_only;
  // listed_only applies only to members whose offset is known (a reader
  // that reads them later by offset): the others are read as usual.
  bool list_only_with_offset = false;
  // Bytes a read of a shard file asks for (0: 1 MiB). Members passed over
  // within the current block cost their bytes anyway, the others a seek: a
  // reader that passes over most members (a replay) reads far less with
  // small blocks (a tar header, a label and an image's head fit in 8 KiB).
  std::size_t read_block = 0;
  // Shown the first bytes of each member read (up to kMemberHeadBytes, all
  // of a smaller member) with its extension: false keeps only those bytes as
  // the member's data and passes over the rest unread. A member that proves
  // to be no image (sixteen 100 MiB zero-filled ".jpg" members packed in a
  // 1.6 MB gzip shard) then costs its head, not its size; its reader still
  // says why it is none. Empty: every member is read whole.
  std::function<bool(std::string_view extension, std::span<const std::byte> head)> keep;
  // Polled while waiting on a pipe: command's output or an http(s) transfer
  // (every 100 ms, back-off waits included): true ends the shard at once with
  // error() "stopped", ends the command (SIGTERM to its process group,
  // SIGKILL a second later) or the transfer, and never starts it again.
  std::function<bool()> cancelled;
};

// The file a local shard names (a path, or "file:PATH"); nothing for pipe:
// commands and http(s) URLs.
[[nodiscard]] std::optional<std::string> local_shard_path(std::string_view shard);

// Whether `shard` is an "http://" or "https://" URL (the scheme in any case).
[[nodiscard]] bool is_http_shard(std::string_view shard) noexcept;

// Not thread-safe; one reader per shard.
class ShardReader {
 public:
  // Throws IoError naming the shard if it cannot be opened (for pipes: the
  // command cannot be started; for URLs: libcurl cannot be set up; network
  // and HTTP failures are not thrown but end the shard in next()).
  explicit ShardReader(std::string shard, ShardReaderOptions options = {});
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  // The next sample, or nothing at the end of the shard. A shard that ends
  // early (truncated, corrupt, a failing command) ends here too, with
  // error() saying why; samples completed before that point are returned,
  // the one it cut is not. A failing pipe: command is started again (up to
  // pipe_attempts times), a failing transfer fetched again from its start
  // (up to http.attempts times, after http.retry_delay()), and the samples
  // already returned are read past, never repeated. error() names a URL
  // without its user, password or query (public_shard_name()).
  [[nodiscard]] std::optional<ShardSample> next();
  [[nodiscard]] const std::optional<std::string>& error() const noexcept { return error_; }
  [[nodiscard]] const std::string& shard() const noexcept { return shard_; }
  // Members listed oversized.
  [[nodiscard]] std::uint64_t oversized_members() const noexcept { return oversized_; }
  // Members passed over for not being regular files or having no key.
  [[nodiscard]] std::uint64_t keyless_members() const noexcept { return keyless_; }

 private:
  class Source;  // the archive handle and, for pipes, the child process
  struct SourceFailure;
  void open();
  bool end_abnormally(const std::string& reason);
  // Whether a failed source may be opened again, after the back-off wait.
  bool may_retry(const std::optional<SourceFailure>& failure);
  std::optional<ShardSample> end_cleanly();
  // Reads members until the key changes; returns the completed sample, if any.
  std::optional<ShardSample> read_until_next_key();
  // Reads or passes over the current member; false if the archive ends inside it.
  bool add_member(const std::string& name, std::string extension, std::uint64_t size, ShardSample& sample);
  // Reads the current member into out (its head first when options_.keep asks).
  // listed_only: a member that keep() keeps is passed over after its head,
  // `unread` set (its data empty); one it refuses keeps its head as usual.
  bool read_member(std::string_view extension, ByteBuffer& out, std::uint64_t size, bool listed_only, bool& unread);

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
