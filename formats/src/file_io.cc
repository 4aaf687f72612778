#include "tensorcom/formats/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "tensorcom/codec/error.h"
#include "tensorcom/codec/regular_file.h"

namespace tensorcom::formats {

namespace {

// Closes the FILE* of a read on every exit path.
struct FileCloser {
  void operator()(std::FILE* file) const noexcept { std::fclose(file); }
};
using InputFile = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

FileContents read_file(const std::filesystem::path& path, std::uint64_t limit) {
  RegularFile regular(path, "file");
  InputFile file(::fdopen(regular.fd(), "rb"));
  if (!file) throw tensorcom::IoError("cannot open " + path.string(), errno);
  (void)regular.release();  // the FILE* closes it now
  FileContents contents;
  contents.size = regular.size();
  if (contents.size > limit) {
    contents.over_limit = true;
    return contents;
  }
  // Sized by fstat for one read; read on in blocks for a file that grew
  // meanwhile, never past the limit.
  std::size_t done = 0;
  contents.bytes.resize(static_cast<std::size_t>(contents.size) + 1);
  for (;;) {
    std::size_t n = std::fread(contents.bytes.data() + done, 1, contents.bytes.size() - done, file.get());
    done += n;
    if (done < contents.bytes.size()) break;
    if (done > limit) {
      contents.bytes.clear();
      contents.size = done;
      contents.over_limit = true;
      return contents;
    }
    const std::uint64_t cap = limit < std::numeric_limits<std::uint64_t>::max() ? limit + 1 : limit;
    contents.bytes.resize(static_cast<std::size_t>(std::min<std::uint64_t>(contents.bytes.size() * 2, cap)));
  }
  if (std::ferror(file.get())) throw tensorcom::IoError("cannot read " + path.string(), errno);
  contents.bytes.resize(done);
  contents.size = done;
  return contents;
}

ByteBuffer read_file_range(const std::filesystem::path& path, std::uint64_t offset, std::uint64_t size) {
  RegularFile file(path, "file");
  if (offset > file.size() || size > file.size() - offset) {
    throw tensorcom::IoError(path.string() + " holds " + std::to_string(file.size()) + " bytes, not the " +
                                 std::to_string(size) + " from byte " + std::to_string(offset) +
                                 " listed before: changed since?",
                             EIO);
  }
  ByteBuffer bytes(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(file.fd(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw tensorcom::IoError("cannot read " + path.string(), errno);
    if (n == 0) throw tensorcom::IoError(path.string() + " ended before byte " + std::to_string(offset + size), EIO);
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

void create_parent_directories(const std::filesystem::path& path) {
  std::filesystem::path parent = path.parent_path();
  if (parent.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(parent, error);
  if (error) throw tensorcom::IoError("cannot create folder " + parent.string(), error.value());
}

}  // namespace tensorcom::formats
