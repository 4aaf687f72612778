#include "tensorcom/formats/shard_reader.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "tensorcom/error.h"
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

ArchivePtr new_reader() {
  ArchivePtr a(archive_read_new());
  if (!a) throw IoError("cannot create an archive reader", ENOMEM);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  return a;
}

}  // namespace

// The archive handle and, for "pipe:" shards, the child whose output it reads.
class ShardReader::Source {
 public:
  Source(const std::string& shard, const std::function<bool()>& cancelled)
      : archive_(new_reader()), cancelled_(cancelled) {
    if (shard.starts_with(kPipePrefix)) {
      start_command(shard.substr(kPipePrefix.size()));
    } else {
      std::string path = shard.starts_with(kFilePrefix) ? shard.substr(kFilePrefix.size()) : shard;
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

  // Closes the archive and reaps the command (after ending it, if reading
  // was cancelled); returns why the command failed, if it did.
  [[nodiscard]] std::optional<std::string> finish() {
    archive_.reset();
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
    if (child_ < 0) return std::nullopt;
    int status = cancelled() ? end_command() : wait_for_command();
    child_ = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return std::nullopt;
    if (WIFEXITED(status))
      return "command '" + command_ + "' exited with status " + std::to_string(WEXITSTATUS(status));
    return "command '" + command_ + "' was killed by signal " + std::to_string(WTERMSIG(status));
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
  std::string command_;
  std::optional<std::string> open_error_;
};

ShardReader::ShardReader(std::string shard, ShardReaderOptions options) : shard_(std::move(shard)), options_(options) {
  open();
}

ShardReader::~ShardReader() = default;

void ShardReader::open() {
  ++attempts_;
  source_ = std::make_unique<Source>(shard_, options_.cancelled);
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
// is no archive). A failing pipe: command is started again and the samples it
// already gave are skipped; returns whether reading goes on.
bool ShardReader::end_abnormally(const std::string& reason) {
  pending_.reset();  // its members may be incomplete
  const bool cancelled = source_->cancelled();
  std::optional<std::string> failure = source_->finish();
  if (cancelled) {
    error_ = "stopped";
    done_ = true;
    return false;
  }
  if (failure && attempts_ < options_.pipe_attempts) {
    open();
    position_ = 0;
    return true;
  }
  error_ = reason;
  if (failure) *error_ += "; " + *failure + " (tried " + std::to_string(attempts_) + " times)";
  done_ = true;
  return false;
}

std::optional<ShardSample> ShardReader::end_cleanly() {
  // The archive's own end marker was read: every sample is complete, even if
  // the command that produced it then failed.
  if (auto failure = source_->finish()) error_ = *failure + " after a complete archive";
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

// Reads the current member's data; false if the archive ends inside it.
bool read_member(archive* a, ByteBuffer& out, std::uint64_t size) {
  std::size_t done = 0;
  out.resize(static_cast<std::size_t>(std::min<std::uint64_t>(size, kFirstMemberBlock)));
  while (done < size) {
    if (done == out.size()) out.resize(static_cast<std::size_t>(std::min<std::uint64_t>(size, 2 * out.size())));
    la_ssize_t n = archive_read_data(a, out.data() + done, out.size() - done);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

bool ShardReader::add_member(const std::string& name, std::string extension, std::uint64_t size, ShardSample& sample) {
  if (options_.wanted && !options_.wanted(sample, extension)) {
    return archive_read_data_skip(source_->get()) >= ARCHIVE_WARN;
  }
  ShardMember member{name, std::move(extension), {}, size, false};
  if (size > options_.max_member_bytes) {
    ++oversized_;
    member.oversized = true;
    sample.members.push_back(std::move(member));
    return archive_read_data_skip(source_->get()) >= ARCHIVE_WARN;
  }
  if (!read_member(source_->get(), member.data, size)) return false;
  sample.members.push_back(std::move(member));
  return true;
}

}  // namespace tensorcom::formats
