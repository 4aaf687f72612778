// Whole-file reads and an owned FILE* for writing, both reporting failures as
// tensorcom::IoError naming the file.
#pragma once

#include <cstdio>
#include <filesystem>
#include <span>
#include <vector>

namespace make_shards {

using Bytes = std::vector<unsigned char>;

// Returns the contents of path. Throws IoError naming path if it cannot be
// opened or read (a directory fails here too).
[[nodiscard]] Bytes read_file(const std::filesystem::path& path);

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
  void write(std::span<const unsigned char> bytes);
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

}  // namespace make_shards
