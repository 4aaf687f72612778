#include "tensorcom/codec/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "tensorcom/codec/error.h"

namespace tensorcom {

namespace {

constexpr std::string_view kSuffix = ".partial";

// mkstemp's files are 0600: give the new file what open(0666) would.
void set_default_permissions(int fd) {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path, IfAbandoned if_abandoned)
    : path_(std::move(path)), if_abandoned_(if_abandoned) {
  std::string pattern = path_.string() + ".XXXXXX" + std::string(kSuffix);
  fd_ = ::mkostemps(pattern.data(), static_cast<int>(kSuffix.size()), O_CLOEXEC);
  if (fd_ < 0) throw IoError("cannot create a temporary file beside '" + path_.string() + "'", errno);
  set_default_permissions(fd_);
  temporary_ = std::move(pattern);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      temporary_(std::exchange(other.temporary_, {})),
      fd_(std::exchange(other.fd_, -1)),
      if_abandoned_(other.if_abandoned_) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    abandon();
    path_ = std::move(other.path_);
    temporary_ = std::exchange(other.temporary_, {});
    fd_ = std::exchange(other.fd_, -1);
    if_abandoned_ = other.if_abandoned_;
  }
  return *this;
}

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::abandon() noexcept {
  if (if_abandoned_ == IfAbandoned::kRemove) return discard();
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) throw IoError("write to a closed file '" + temporary_.string() + "'", EBADF);
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError("cannot write '" + temporary_.string() + "'", errno);
    }
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw IoError("commit of a closed file '" + temporary_.string() + "'", EBADF);
  const int fd = std::exchange(fd_, -1);
  // Synced before the rename: a crash after it must not leave path naming a
  // file whose data never reached the disk (a full disk may also show only
  // here).
  int error = ::fsync(fd) != 0 ? errno : 0;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && ::rename(temporary_.c_str(), path_.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temporary_.c_str());
    throw IoError("cannot write '" + path_.string() + "' (through '" + temporary_.string() + "')", error);
  }
  temporary_.clear();
  sync_folder(path_.parent_path());
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
  temporary_.clear();
}

void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> contents) {
  AtomicFile file(path);
  file.write(contents);
  file.commit();
}

void sync_folder(const std::filesystem::path& folder) {
  const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open folder '" + folder.string() + "'", errno);
  const int error = ::fsync(fd) != 0 && errno != EINVAL ? errno : 0;
  ::close(fd);
  if (error != 0) throw IoError("cannot sync folder '" + folder.string() + "'", error);
}

}  // namespace tensorcom
