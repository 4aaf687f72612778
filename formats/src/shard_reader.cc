#include "tensorcom/formats/shard_reader.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <span>
#include <utility>

#include "http_stream.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/formats/webdataset.h"

namespace tensorcom::formats {

namespace {

constexpr std::string_view kPipePrefix = "pipe:";
constexpr std::string_view kFilePrefix = "file:";
constexpr std::size_t kReadBlock = 1 << 20;

// Member data is read into a buffer grown as it arrives, so that a header
// declaring a huge member in a small (or cut) shard costs only what is there.
constexpr std::size_t kFirstMemberBlock = std::size_t{1} << 20;

// libarchive leaves the message unset after some failures (a corrupt gzip
// stream, for one), and a null would crash the string that reports it.
std::string archive_message(archive* a) {
  const char* text = archive_error_string(a);
  return text ? text : "unreadable (libarchive gave no reason)";
}

struct ArchiveFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, ArchiveFree>;

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(text[i])) != prefix[i]) return false;
  }
  return true;
}

// Sleeps `delay` in slices of 100 ms; false (at once) if `cancelled` says so.
bool wait_unless_cancelled(std::chrono::milliseconds delay, const std::function<bool()>& cancelled) {
  const auto until = std::chrono::steady_clock::now() + delay;
  for (;;) {
    if (cancelled && cancelled()) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return true;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(100)));
  }
}

ArchivePtr new_reader() {
  ArchivePtr a(archive_read_new());
  if (!a) throw IoError("cannot create an archive reader", ENOMEM);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  return a;
}

}  // namespace

bool is_http_shard(std::string_view shard) noexcept {
  return starts_with_nocase(shard, "http://") || starts_with_nocase(shard, "https://");
}

std::optional<std::string> local_shard_path(std::string_view shard) {
  if (shard.starts_with(kPipePrefix) || is_http_shard(shard)) return std::nullopt;
  if (shard.starts_with(kFilePrefix)) shard.remove_prefix(kFilePrefix.size());
  return std::string(shard);
}

std::chrono::milliseconds HttpShardOptions::retry_delay(int failures) const noexcept {
  std::chrono::milliseconds delay = std::max(first_retry_delay, std::chrono::milliseconds(0));
  for (int i = 1; i < failures && delay < max_retry_delay; ++i) delay *= 2;
  return std::min(delay, max_retry_delay);
}

// Why a source failed beyond what libarchive saw: a command's exit status,
// or a transfer's failure.
struct ShardReader::SourceFailure {
  std::string message;
  bool retryable = true;  // opening the shard again may succeed
  bool transfer = false;  // an http(s) transfer's: the message names the URL and says it all
};

// The archive handle and, for "pipe:" shards, the child whose output it
// reads; for http(s) URLs, the transfer.
class ShardReader::Source {
 public:
  Source(const std::string& shard, const ShardReaderOptions& options)
      : archive_(new_reader()), cancelled_(options.cancelled) {
    if (shard.starts_with(kPipePrefix)) {
      start_command(shard.substr(kPipePrefix.size()));
    } else if (is_http_shard(shard)) {
      start_transfer(shard, options.http);
    } else {
      const std::string path = *local_shard_path(shard);
      local_file_ = true;
      if (options.read_block && open_in_small_blocks(shard, path, options.read_block)) return;
      if (archive_read_open_filename(archive_.get(), path.c_str(), kReadBlock) != ARCHIVE_OK) {
        int code = archive_errno(archive_.get());
        throw IoError("cannot open shard '" + shard + "': " + archive_message(archive_.get()), code ? code : EIO);
      }
    }
  }
  ~Source() { (void)finish(); }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  [[nodiscard]] archive* get() const noexcept { return archive_.get(); }
  [[nodiscard]] const std::optional<std::string>& open_error() const noexcept { return open_error_; }

  [[nodiscard]] bool cancelled() const { return cancelled_ && cancelled_(); }

  // Where the current member's bytes start in the shard file, read right
  // after its header: known for a local, uncompressed tar only.
  [[nodiscard]] std::optional<std::uint64_t> data_offset() const {
    archive* a = archive_.get();
    if (!local_file_ || archive_filter_count(a) != 1 || archive_filter_code(a, 0) != ARCHIVE_FILTER_NONE)
      return std::nullopt;
    const la_int64_t offset = archive_filter_bytes(a, 0);
    if (offset < 0) return std::nullopt;
    return static_cast<std::uint64_t>(offset);
  }

  // Closes the archive, ends the transfer and reaps the command (after
  // ending it, if reading was cancelled); returns why the command or the
  // transfer failed, if it did.
  [[nodiscard]] std::optional<SourceFailure> finish() {
    archive_.reset();
    if (http_) return end_transfer();
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
    if (child_ < 0) return std::nullopt;
    int status = cancelled() ? end_command() : wait_for_command();
    child_ = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return std::nullopt;
    if (WIFEXITED(status))
      return SourceFailure{"command '" + command_ + "' exited with status " + std::to_string(WEXITSTATUS(status))};
    return SourceFailure{"command '" + command_ + "' was killed by signal " + std::to_string(WTERMSIG(status))};
  }

 private:
  // Waits for the command to exit; ends it if reading is cancelled meanwhile
  // (a command may stall after a whole archive).
  int wait_for_command() {
    int status = 0;
    for (;;) {
      pid_t done = ::waitpid(child_, &status, WNOHANG);
      if (done == child_ || (done < 0 && errno != EINTR)) return status;
      if (cancelled()) return end_command();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  int wait_blocking() {
    int status = 0;
    while (::waitpid(child_, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  }

  // SIGTERM to the command's process group (the shell and what it started),
  // SIGKILL if it is still there a second later.
  int end_command() {
    ::kill(-child_, SIGTERM);
    int status = 0;
    for (int waited_ms = 0; waited_ms < 1000; waited_ms += 10) {
      if (::waitpid(child_, &status, WNOHANG) == child_) return status;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(-child_, SIGKILL);
    return wait_blocking();
  }

  // libarchive's read callback for a command's output: waits in slices of
  // 100 ms, so that a stalled command cannot keep a cancelled reader.
  static la_ssize_t read_output(archive* a, void* client, const void** block) {
    auto* self = static_cast<Source*>(client);
    for (;;) {
      if (self->cancelled()) {
        archive_set_error(a, ECANCELED, "stopped");
        return -1;
      }
      pollfd p{self->fd_, POLLIN, 0};
      int ready = ::poll(&p, 1, 100);
      if (ready < 0 && errno != EINTR) break;
      if (ready <= 0) continue;
      ssize_t n = ::read(self->fd_, self->buffer_.data(), self->buffer_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      *block = self->buffer_.data();
      return n;
    }
    archive_set_error(a, errno, "cannot read the command's output");
    return -1;
  }

  // A regular file read in blocks of `block` bytes, members passed over by
  // seeking (libarchive's own file reader reads at least 64 KiB at a time,
  // most of a photo that a replay passes over). False: not a regular file,
  // left to libarchive.
  bool open_in_small_blocks(const std::string& shard, const std::string& path, std::size_t block) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw IoError("cannot open shard '" + shard + "'", errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return false;
    }
    fd_ = fd;
    buffer_.resize(block);
    archive* a = archive_.get();
    archive_read_set_skip_callback(a, skip_in_file);
    if (archive_read_open(a, this, nullptr, read_file_block, nullptr) != ARCHIVE_OK) {
      throw IoError("cannot open shard '" + shard + "': " + archive_message(a), EIO);
    }
    return true;
  }

  static la_ssize_t read_file_block(archive* a, void* client, const void** block) {
    auto* self = static_cast<Source*>(client);
    for (;;) {
      const ssize_t n = ::read(self->fd_, self->buffer_.data(), self->buffer_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        archive_set_error(a, errno, "cannot read the shard");
        return -1;
      }
      *block = self->buffer_.data();
      return n;
    }
  }

  // Passes over `request` bytes (libarchive asks only what it knows is
  // there); returns how many.
  static la_int64_t skip_in_file(archive*, void* client, la_int64_t request) {
    auto* self = static_cast<Source*>(client);
    if (request <= 0 || ::lseek(self->fd_, request, SEEK_CUR) < 0) return 0;
    return request;
  }

  // libarchive's read callback for a URL's body.
  static la_ssize_t read_body(archive* a, void* client, const void** block) {
    auto* self = static_cast<Source*>(client);
    std::optional<std::span<const std::byte>> bytes = self->http_->read();
    if (!bytes) {
      archive_set_error(a, EIO, "%s", self->http_->failure()->message.c_str());
      return -1;
    }
    *block = bytes->data();
    return static_cast<la_ssize_t>(bytes->size());
  }

  void start_transfer(const std::string& url, const HttpShardOptions& options) {
    http_ = std::make_unique<detail::HttpStream>(url, options, cancelled_);
    if (archive_read_open(archive_.get(), this, nullptr, read_body, nullptr) != ARCHIVE_OK) {
      // Not thrown: a failed transfer may be retried, and says more.
      open_error_ = "body is not an archive: " + archive_message(archive_.get());
    }
  }

  std::optional<SourceFailure> end_transfer() {
    std::optional<detail::HttpFailure> failure = http_->failure();
    http_.reset();
    if (!failure) return std::nullopt;
    return SourceFailure{std::move(failure->message), failure->retryable, true};
  }

  void start_command(const std::string& command) {
    command_ = command;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw IoError("cannot create a pipe for '" + command + "'", errno);
    pid_t pid = ::fork();
    if (pid < 0) {
      int code = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      throw IoError("cannot start '" + command + "'", code);
    }
    if (pid == 0) {
      // Its own process group: a terminal's Ctrl-C reaches the server, which
      // ends the command itself rather than see it die and start it again.
      ::setpgid(0, 0);
      ::dup2(fds[1], STDOUT_FILENO);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    ::setpgid(pid, pid);  // also here, so that no kill can come before the child's own call
    child_ = pid;
    fd_ = fds[0];
    buffer_.resize(kReadBlock);
    if (archive_read_open(archive_.get(), this, nullptr, read_output, nullptr) != ARCHIVE_OK) {
      // Not thrown: the command's exit status says more, and it may be retried.
      open_error_ = "output is not an archive: " + archive_message(archive_.get());
    }
  }

  ArchivePtr archive_;
  const std::function<bool()>& cancelled_;
  std::vector<std::byte> buffer_;  // a command's output, a block at a time
  pid_t child_ = -1;
  int fd_ = -1;
  bool local_file_ = false;  // a path, not a command's output or a transfer
  std::string command_;
  std::unique_ptr<detail::HttpStream> http_;  // for URLs
  std::optional<std::string> open_error_;
};

ShardReader::ShardReader(std::string shard, ShardReaderOptions options) : shard_(std::move(shard)), options_(options) {
  open();
}

ShardReader::~ShardReader() = default;

void ShardReader::open() {
  ++attempts_;
  source_ = std::make_unique<Source>(shard_, options_);
}

std::optional<ShardSample> ShardReader::next() {
  while (!done_) {
    std::optional<ShardSample> sample = read_until_next_key();
    if (!sample) continue;
    if (++position_ <= delivered_) continue;  // delivered by an earlier attempt
    ++delivered_;
    return sample;
  }
  return std::nullopt;
}

// The shard ended abnormally (truncated, corrupt, or a command's output that
// is no archive). A failing pipe: command or transfer is started again and
// the samples it already gave are skipped; returns whether reading goes on.
bool ShardReader::end_abnormally(const std::string& reason) {
  pending_.reset();  // its members may be incomplete
  std::optional<SourceFailure> failure = source_->finish();
  if (!source_->cancelled() && may_retry(failure)) {
    open();
    position_ = 0;
    return true;
  }
  done_ = true;
  if (source_->cancelled()) {
    error_ = "stopped";
    return false;
  }
  // libarchive's reason for a failed transfer only repeats it, or hides it
  // behind "truncated".
  error_ = failure && failure->transfer ? failure->message : reason;
  if (failure && !failure->transfer) *error_ += "; " + failure->message;
  if (failure && failure->retryable && attempts_ > 1) *error_ += " (tried " + std::to_string(attempts_) + " times)";
  return false;
}

bool ShardReader::may_retry(const std::optional<SourceFailure>& failure) {
  if (!failure || !failure->retryable) return false;
  if (!failure->transfer) return attempts_ < options_.pipe_attempts;
  return attempts_ < options_.http.attempts &&
         wait_unless_cancelled(options_.http.retry_delay(attempts_), options_.cancelled);
}

std::optional<ShardSample> ShardReader::end_cleanly() {
  // The archive's own end marker was read: every sample is complete, even if
  // the command that produced it then failed. A transfer's trouble past that
  // marker (a Content-Length beyond it) costs nothing, and whether curl saw
  // it before the reader stopped is chance: it is not reported.
  if (auto failure = source_->finish(); failure && !failure->transfer)
    error_ = failure->message + " after a complete archive";
  done_ = true;
  return std::exchange(pending_, std::nullopt);
}

std::optional<ShardSample> ShardReader::read_until_next_key() {
  if (source_->open_error()) {
    end_abnormally(*source_->open_error());
    return std::nullopt;
  }
  for (;;) {
    archive_entry* entry = nullptr;
    int status = archive_read_next_header(source_->get(), &entry);
    if (status == ARCHIVE_EOF) return end_cleanly();
    if (status < ARCHIVE_WARN) {
      end_abnormally("truncated or corrupt: " + archive_message(source_->get()));
      return std::nullopt;
    }
    const char* path = archive_entry_pathname(entry);
    std::optional<MemberName> name = path ? split_member_name(path) : std::nullopt;
    if (archive_entry_filetype(entry) != AE_IFREG || !name) {
      ++keyless_;
      continue;
    }
    std::optional<ShardSample> completed;
    if (pending_ && pending_->key != name->key) completed = std::exchange(pending_, std::nullopt);
    if (!pending_) {
      pending_.emplace();
      pending_->key = std::move(name->key);
    }
    const std::uint64_t size = archive_entry_size_is_set(entry)
                                   ? static_cast<std::uint64_t>(std::max<la_int64_t>(archive_entry_size(entry), 0))
                                   : 0;
    if (!add_member(path, std::move(name->extension), size, *pending_)) {
      // The shard broke inside this member. The sample before it is whole.
      bool retrying = end_abnormally("truncated or corrupt: " + archive_message(source_->get()));
      return retrying ? std::nullopt : completed;
    }
    if (completed) return completed;
  }
}

namespace {

// Reads the current member's data from out's first `done` bytes on, up to
// `until` bytes in all; false if the archive ends inside it.
bool read_member_until(archive* a, ByteBuffer& out, std::size_t done, std::uint64_t until) {
  out.resize(std::max(out.size(), static_cast<std::size_t>(std::min<std::uint64_t>(until, kFirstMemberBlock))));
  while (done < until) {
    if (done == out.size()) out.resize(static_cast<std::size_t>(std::min<std::uint64_t>(until, 2 * out.size())));
    la_ssize_t n = archive_read_data(a, out.data() + done, out.size() - done);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return true;
}

}  // namespace

bool ShardReader::add_member(const std::string& name, std::string extension, std::uint64_t size, ShardSample& sample) {
  if (options_.wanted && !options_.wanted(sample, extension)) {
    return archive_read_data_skip(source_->get()) >= ARCHIVE_WARN;
  }
  ShardMember member{name, std::move(extension), {}, size, false, false, source_->data_offset()};
  if (size > options_.max_member_bytes) {
    ++oversized_;
    member.oversized = true;
    sample.members.push_back(std::move(member));
    return archive_read_data_skip(source_->get()) >= ARCHIVE_WARN;
  }
  // Listed as it would be if read: oversized first, whatever listed_only says.
  const bool listed_only = options_.listed_only && (member.offset || !options_.list_only_with_offset) &&
                           options_.listed_only(sample, member.extension);
  if (!read_member(member.extension, member.data, size, listed_only, member.unread)) return false;
  sample.members.push_back(std::move(member));
  return true;
}

bool ShardReader::read_member(std::string_view extension, ByteBuffer& out, std::uint64_t size, bool listed_only,
                              bool& unread) {
  archive* a = source_->get();
  if (!options_.keep && listed_only) {
    unread = true;
    return archive_read_data_skip(a) >= ARCHIVE_WARN;
  }
  if (!options_.keep) return read_member_until(a, out, 0, size);
  const std::uint64_t head = std::min<std::uint64_t>(size, kMemberHeadBytes);
  if (!read_member_until(a, out, 0, head)) return false;
  if (!options_.keep(extension, out)) return head == size || archive_read_data_skip(a) >= ARCHIVE_WARN;
  if (listed_only) {
    // Its head said it is kept: its bytes are not wanted now, only that.
    out.clear();
    unread = true;
    return head == size || archive_read_data_skip(a) >= ARCHIVE_WARN;
  }
  return read_member_until(a, out, out.size(), size);
}

}  // namespace tensorcom::formats
