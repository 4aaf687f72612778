// The one way tensorcom replaces a file: written beside it under a unique
// temporary name, synced, renamed over it, and the rename synced. A crash
// (kill -9, power loss) at any point leaves either the old file or the new
// one under the final name, never a torn or empty one; at most the
// temporary PATH.XXXXXX.partial is left beside it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>

namespace tensorcom {

class AtomicFile {
 public:
  // What the destructor does with a file neither committed nor discarded.
  enum class IfAbandoned {
    kRemove,  // nothing is left of it
    kKeep,    // the temporary file stays, for a salvage (a recording cut short)
  };
  // Creates the temporary file beside path, with the permissions a plain
  // create would give it (umask applied). Throws IoError naming path.
  explicit AtomicFile(std::filesystem::path path, IfAbandoned if_abandoned = IfAbandoned::kRemove);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  // Closes the file; removes an uncommitted one unless IfAbandoned::kKeep.
  ~AtomicFile();

  // Appends bytes, resuming after short writes. Throws IoError naming the
  // temporary file. REQUIRES: open (neither committed nor discarded).
  void write(std::span<const std::byte> bytes);
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }
  // The temporary file's descriptor, for writers that gather (writev);
  // owned by this object. -1 once committed or discarded.
  [[nodiscard]] int fd() const noexcept { return fd_; }

  // Syncs and closes the temporary file, renames it to path() (replacing any
  // file there) and syncs the folder. Throws IoError; the temporary file is
  // then removed. REQUIRES: open.
  void commit();
  // Closes and removes the temporary file; path() is left as it was.
  // Idempotent.
  void discard() noexcept;

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] const std::filesystem::path& temporary() const noexcept { return temporary_; }

 private:
  void abandon() noexcept;

  std::filesystem::path path_;
  std::filesystem::path temporary_;  // empty once committed or discarded
  int fd_ = -1;
  IfAbandoned if_abandoned_ = IfAbandoned::kRemove;
};

// Replaces path with `contents` through an AtomicFile. Throws IoError.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> contents);

// Makes a rename or a creation in `folder` durable; file systems that cannot
// sync a folder (EINVAL) are taken as they are. Throws IoError.
void sync_folder(const std::filesystem::path& folder);

}  // namespace tensorcom
