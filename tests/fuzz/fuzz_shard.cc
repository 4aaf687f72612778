// libFuzzer target: reading webdataset tar shards (they come from anywhere:
// disks, pipes, other people's tools). The input is the shard's bytes; every
// sample that comes out must be well formed, and a bad shard must end with
// error() set rather than crash or hang.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tensorcom/error.h"
#include "tensorcom/formats/shard_reader.h"

using namespace tensorcom::formats;

namespace {

// The bytes as a file with a path, without touching the disk.
class MemoryFile {
 public:
  MemoryFile(const std::uint8_t* data, std::size_t size) : fd_(::memfd_create("shard", 0)) {
    if (fd_ < 0) std::abort();
    for (std::size_t done = 0; done < size;) {
      ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<std::size_t>(n);
    }
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  [[nodiscard]] std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  MemoryFile file(data, size);
  ShardReaderOptions options;
  options.max_member_bytes = 1 << 16;
  try {
    ShardReader reader(file.path(), options);
    while (auto sample = reader.next()) {
      // Members over the limit are listed unread, never cut short; every
      // member has a key and an extension, as webdataset splits names.
      if (sample->key.empty() || sample->members.empty()) std::abort();
      for (const ShardMember& member : sample->members) {
        if (member.extension.empty()) std::abort();
        if (member.oversized ? (!member.data.empty() || member.size <= options.max_member_bytes)
                             : member.data.size() != member.size) {
          std::abort();
        }
      }
    }
  } catch (const tensorcom::Error&) {
    // An unreadable shard is refused with a message: fine.
  }
  return 0;
}
