// .ten files: the single-buffer encoding of one list, or of several lists back
// to back (what `tenbin record` writes). Reading maps the file and returns
// views into the mapping, so nothing is copied; the mapping lives as long as
// any tensor read from it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "tensorcom/tenbin.h"

namespace tensorcom {

// A read-only view of a whole file, mapped copy-on-write: writing through a
// tensor that views it changes this process's pages, never the file.
class MappedFile {
 public:
  // Throws IoError if the file cannot be opened, sized or mapped.
  [[nodiscard]] static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  MappedFile(std::filesystem::path path, std::byte* data, std::size_t size) noexcept
      : path_(std::move(path)), data_(data), size_(size) {}

  std::filesystem::path path_;
  std::byte* data_;
  std::size_t size_;
};

// Reads every tensor of a .ten file as one list, as the reference's load().
// Throws IoError, or FormatError with the file name in the message.
[[nodiscard]] TensorList read_ten(const std::filesystem::path& path, const DecodeLimits& limits = {});

// Tells read_ten_lists to find the list length from the tensors themselves.
inline constexpr std::size_t kInferListLength = 0;

// Reads a file of several lists back to back, split every tensors_per_list
// tensors. With kInferListLength the length is the shortest period of the
// tensors' signatures (dtype, info, ndim, dims after the first): a file of
// recorded [images, labels] batches splits into pairs, a file of one list
// whose tensors differ stays one list. Throws as read_ten, and FormatError if
// the tensor count is not a multiple of tensors_per_list.
[[nodiscard]] std::vector<TensorList> read_ten_lists(const std::filesystem::path& path,
                                                     std::size_t tensors_per_list = kInferListLength,
                                                     const DecodeLimits& limits = {});
// The inference behind kInferListLength; 0 for no tensors.
[[nodiscard]] std::size_t infer_list_length(std::span<const Tensor> tensors) noexcept;
// Splits a flat list into lists of tensors_per_list (which must divide it).
[[nodiscard]] std::vector<TensorList> split_lists(TensorList tensors, std::size_t tensors_per_list);

// Writes lists to a .ten file, one after another, without copying tensor data
// (it goes to the kernel straight from the tensors). Move-only; the file is
// closed by close() or the destructor.
class TenWriter {
 public:
  enum class Mode { kTruncate, kAppend };
  // Throws IoError.
  explicit TenWriter(const std::filesystem::path& path, Mode mode = Mode::kTruncate);
  TenWriter(TenWriter&& other) noexcept;
  TenWriter& operator=(TenWriter&& other) noexcept;
  ~TenWriter();

  // Appends one list. Throws IoError.
  void write(std::span<const Tensor> tensors);
  // Flushes and closes; throws IoError if closing reports an error.
  void close();
  [[nodiscard]] std::size_t bytes_written() const noexcept { return bytes_written_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::size_t bytes_written_ = 0;
};

// Writes one list to a new .ten file (the reference's save()).
void write_ten(const std::filesystem::path& path, std::span<const Tensor> tensors);

}  // namespace tensorcom
