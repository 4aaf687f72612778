// Writing .ten files (the reading side is ten_file.h). The encoding is
// tenbin's (tenbin.h, docs/tenbin.md).
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>

#include "tensorcom/codec/atomic_file.h"
#include "tensorcom/codec/tensor.h"

namespace tensorcom {

// Writes lists to a .ten file, one after another, without copying tensor data
// (it goes to the kernel straight from the tensors, one writev per list:
// there is no buffer in the process, so a crash loses at most the list being
// written). Move-only; the file is finished by close(), and closed by the
// destructor.
class TenWriter {
 public:
  enum class Mode {
    kTruncate,  // write path itself, from empty
    kAppend,    // add to the end of path
    // Write a temporary file beside path (temporary_path(): PATH.XXXXXX.partial,
    // a unique name); close() syncs it to disk and renames it to path, so
    // that path holds a whole file or nothing new. Without close() (a crash,
    // an error) the temporary file stays, with every list written before:
    // salvage_ten reads them back. discard() removes it.
    kReplace,
  };
  // Throws IoError.
  explicit TenWriter(const std::filesystem::path& path, Mode mode = Mode::kTruncate);
  TenWriter(TenWriter&& other) noexcept;
  TenWriter& operator=(TenWriter&& other) noexcept;
  ~TenWriter();

  // Appends one list. Throws IoError.
  void write(std::span<const Tensor> tensors);
  // Closes the file (kReplace: after syncing it, renames it to path); throws
  // IoError if closing, syncing or renaming reports an error. Once closed,
  // write() throws.
  void close();
  // kReplace: closes and removes the temporary file (path is left as it
  // was). Other modes: closes. Never throws.
  void discard() noexcept;
  // The file being written: path, or with kReplace the temporary file.
  [[nodiscard]] const std::filesystem::path& temporary_path() const noexcept {
    return staged_ ? staged_->temporary() : path_;
  }
  [[nodiscard]] std::size_t bytes_written() const noexcept { return bytes_written_; }

 private:
  std::filesystem::path path_;        // where the file ends up
  std::optional<AtomicFile> staged_;  // kReplace, until closed
  int fd_ = -1;                       // the other modes' file, until closed
  std::size_t bytes_written_ = 0;
};

// Writes one list to a new .ten file (the reference's save()).
void write_ten(const std::filesystem::path& path, std::span<const Tensor> tensors);

}  // namespace tensorcom
