// libFuzzer target: reading webdataset tar shards (they come from anywhere:
// disks, pipes, other people's tools). The input is the shard's bytes; every
// sample that comes out must be well formed, and a bad shard must end with
// error() set rather than crash or hang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "memory_file.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/formats/shard_reader.h"

using namespace tensorcom::formats;
using tensorcom::fuzz::MemoryFile;

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
