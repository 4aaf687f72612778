// Files named by users are opened through here: only regular files. A FIFO
// would block the open itself until some writer came, and a device such as
// /dev/zero (or a symlink to one) never ends; both are refused at once, in
// one line naming the file and what it is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace tensorcom {

class RegularFile {
 public:
  // Opens path for reading. `what` names the file's role in messages
  // ("CURVE certificate"). Throws IoError if it cannot be opened or is not
  // a regular file.
  RegularFile(const std::filesystem::path& path, std::string_view what);
  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  // Gives up the descriptor (the caller closes it).
  [[nodiscard]] int release() noexcept;

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// The whole of a small regular file. Throws IoError if it cannot be read, is
// not a regular file, or holds more than `limit` bytes (checked before
// reading).
[[nodiscard]] std::string read_regular_file(const std::filesystem::path& path, std::uint64_t limit,
                                            std::string_view what);

}  // namespace tensorcom
