// Bytes in memory, whole-file reads and an owned FILE* for writing, all
// reporting failures as tensorcom::IoError naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace tensorcom::formats {

// Leaves the elements a resize adds uninitialised: file and member data is
// read straight over them, so zeroing every image first would be wasted work.
template <class T>
struct UninitialisedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitialisedAllocator<U>;
  };
  UninitialisedAllocator() = default;
  template <class U>
  explicit UninitialisedAllocator(const UninitialisedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// Bytes read from a file or archive member, or encoded for one.
using ByteBuffer = std::vector<std::byte, UninitialisedAllocator<std::byte>>;

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

// A file written under a temporary name (path + ".partial") and renamed to
// path by commit(), so that a failed run leaves nothing incomplete under the
// final name: the destructor removes an uncommitted file. Move-only; not
// thread-safe.
class StagedFile {
 public:
  // Creates or truncates the temporary file. Throws IoError.
  explicit StagedFile(std::filesystem::path path);
  StagedFile(StagedFile&& other) noexcept;
  StagedFile& operator=(StagedFile&& other) noexcept;
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  ~StagedFile();

  // Appends bytes. Throws IoError. REQUIRES: not committed.
  void write(std::span<const std::byte> bytes);
  // Flushes, closes and renames the file to path(), replacing any file there.
  // Throws IoError (the temporary file is then still removed by the
  // destructor). REQUIRES: not committed.
  void commit();

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  void discard() noexcept;

  std::filesystem::path path_;
  std::filesystem::path partial_;
  std::FILE* file_ = nullptr;
  bool staged_ = false;  // partial_ exists and is this object's to remove
};

}  // namespace tensorcom::formats
