#include "tensorcom/codec/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "tensorcom/codec/error.h"

namespace tensorcom {

namespace {

const char* kind_of(mode_t mode) noexcept {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string named(const std::filesystem::path& path, std::string_view what) {
  return std::string(what) + " '" + path.string() + "'";
}

}  // namespace

RegularFile::RegularFile(const std::filesystem::path& path, std::string_view what) {
  // Non-blocking, so that opening a FIFO returns at once to be refused.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0) throw IoError("cannot open " + named(path, what), errno);
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    const int error = errno;
    ::close(fd_);
    throw IoError("cannot stat " + named(path, what), error);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd_);
    throw IoError("will not read " + named(path, what) + ": " + kind_of(info.st_mode) + ", not a regular file", EINVAL);
  }
  size_ = static_cast<std::uint64_t>(info.st_size);
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(std::exchange(other.size_, 0)) {}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

int RegularFile::release() noexcept { return std::exchange(fd_, -1); }

std::string read_regular_file(const std::filesystem::path& path, std::uint64_t limit, std::string_view what) {
  RegularFile file(path, what);
  if (file.size() > limit) {
    throw IoError(named(path, what) + " is " + std::to_string(file.size()) + " bytes, more than the " +
                      std::to_string(limit) + " such a file may have",
                  EFBIG);
  }
  std::string out(static_cast<std::size_t>(file.size()), '\0');
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(file.fd(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError("cannot read " + named(path, what), errno);
    if (n == 0) break;  // shrank meanwhile
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return out;
}

}  // namespace tensorcom
