// Whole-file reads and folder creation, reporting failures as
// tensorcom::IoError naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <vector>

#include "tensorcom/codec/byte_buffer.h"

namespace tensorcom::formats {

using tensorcom::ByteBuffer;

// A whole file, or only its size when it was over the limit it was read with.
struct FileContents {
  ByteBuffer bytes;
  std::uint64_t size = 0;   // the file's size
  bool over_limit = false;  // size > limit: bytes left empty, nothing read
};

// Returns the contents of path (at most `limit` bytes: a larger file is
// reported over_limit, unread). Throws IoError naming path if it cannot be
// opened or read, or is not a regular file (a folder, a FIFO, a device:
// see tensorcom/regular_file.h).
[[nodiscard]] FileContents read_file(const std::filesystem::path& path,
                                     std::uint64_t limit = std::numeric_limits<std::uint64_t>::max());

// `size` bytes of path from byte `offset` on (an archive member whose place
// was listed before). Throws IoError naming path if it cannot be opened or
// read, is not a regular file, or ends before offset + size (changed since
// it was listed).
[[nodiscard]] ByteBuffer read_file_range(const std::filesystem::path& path, std::uint64_t offset, std::uint64_t size);

// Creates path's parent folder (and its parents) if missing. Throws IoError.
void create_parent_directories(const std::filesystem::path& path);

}  // namespace tensorcom::formats
