// .ten files: the single-buffer encoding of one list, or of several lists back
// to back (what `tenbin record` writes; see docs/tenbin.md). Reading copies
// the file into memory of our own with pread, never maps it: another process
// may truncate or rewrite a file while we read it (a recording replaced,
// a dataset regenerated), and a mapping would then kill the process with
// SIGBUS at the first page past the new end. A file that shrinks while read
// is an IoError naming it; what was read before stays valid. Tensors read
// are views into a buffer that lives as long as any of them: one buffer per
// list for the list readers, one for the whole file for read_ten.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <memory>
#include <span>
#include <vector>

#include "tensorcom/codec/tenbin.h"

namespace tensorcom {

// A .ten file is a sequence of lists (batches) back to back, as `tenbin
// record` writes them. Its length is bounded by nothing but its size:
// DecodeLimits::max_tensors bounds each list, never the file, and the
// readers below hold one list at a time.

// Reads every tensor of a .ten file as one flat list, as the reference's
// load(): as many tensors as the file holds (limits.max_tensors does not
// apply; memory grows with the file). Throws IoError, or FormatError with the
// file name in the message.
[[nodiscard]] TensorList read_ten(const std::filesystem::path& path, const DecodeLimits& limits = {});

// Keeps the buffers of lists no longer in use, for later lists of the same
// size: a reader that reads the same files again and again (serve-ten's
// epochs) then reads into pages already in place, where fresh pages cost
// the kernel more to zero than the read costs to copy. Holds at most
// max_free_bytes of unused buffers. Buffers come back from any thread
// (ZeroMQ frees a list once it has sent it); what the pool holds lives as
// long as the pool or any buffer it gave out.
class ReadBufferPool {
 public:
  explicit ReadBufferPool(std::size_t max_free_bytes);
  ~ReadBufferPool();
  ReadBufferPool(const ReadBufferPool&) = delete;
  ReadBufferPool& operator=(const ReadBufferPool&) = delete;

  // Bytes of buffers kept, unused, now.
  [[nodiscard]] std::size_t free_bytes() const;

  struct State;  // shared with the buffers given out
  [[nodiscard]] const std::shared_ptr<State>& state() const noexcept { return state_; }

 private:
  std::shared_ptr<State> state_;
};

// Tells the list readers to find the list length from the tensors themselves.
inline constexpr std::size_t kInferListLength = 0;

// Reads the lists of a .ten file one at a time, each into a buffer of its
// own (the file's size is taken at construction: bytes appended later are
// not read): memory is bounded by one list (and, while the length is inferred, by the signatures of at most
// 2 * limits.max_tensors tensors), whatever the file's length.
//
// The list length is tensors_per_list, or with kInferListLength the shortest
// period of the tensors' signatures (dtype, info, ndim, dims after the first)
// that divides the tensor count, else the whole file as one list: a file of
// recorded [images, labels] batches splits into pairs, a file of one list
// whose tensors differ stays one list. The period is found from the headers
// of the first tensors (no data is touched) once it repeats past
// limits.max_tensors tensors; the tensors after that must follow it.
class TenListReader {
 public:
  // Opens the file and finds the list length. Throws IoError, FormatError
  // naming the file (a damaged tensor among those read to infer the length;
  // no list length of at most limits.max_tensors), ArgumentError for a
  // tensors_per_list over limits.max_tensors.
  // pool: where list buffers come from and go back to (none: each list
  // gets fresh memory, freed with its last tensor).
  explicit TenListReader(const std::filesystem::path& path, std::size_t tensors_per_list = kInferListLength,
                         const DecodeLimits& limits = {}, const ReadBufferPool* pool = nullptr);
  TenListReader(TenListReader&&) noexcept;
  TenListReader& operator=(TenListReader&&) noexcept;
  ~TenListReader();

  // Returns the next list (views into a buffer of its own, holding a copy
  // of the list's bytes), or nothing after the last. Throws FormatError
  // naming the file and the byte offset: a damaged tensor, a last list cut
  // short, a tensor that breaks the inferred pattern; IoError naming the
  // file if it was cut shorter than its size at construction.
  [[nodiscard]] std::optional<TensorList> next();
  // Tensors per list; 0 for a file without tensors.
  [[nodiscard]] std::size_t list_length() const noexcept;
  // Lists returned so far.
  [[nodiscard]] std::uint64_t lists_read() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Reads a whole file through TenListReader. Throws as TenListReader.
[[nodiscard]] std::vector<TensorList> read_ten_lists(const std::filesystem::path& path,
                                                     std::size_t tensors_per_list = kInferListLength,
                                                     const DecodeLimits& limits = {});
// The inference behind kInferListLength for tensors held in memory; 0 for no
// tensors.
[[nodiscard]] std::size_t infer_list_length(std::span<const Tensor> tensors);
// Splits a flat list into lists of tensors_per_list (which must divide it).
[[nodiscard]] std::vector<TensorList> split_lists(TensorList tensors, std::size_t tensors_per_list);

// What salvage_ten found in a file that a crash or a full disk may have cut.
struct SalvageReport {
  std::uint64_t file_bytes = 0;    // the file's size
  std::uint64_t lists = 0;         // whole lists read (and passed on)
  std::uint64_t tensors = 0;       // tensors in them
  std::uint64_t whole_bytes = 0;   // where the last whole list ends: the file's good prefix
  std::uint64_t lost_tensors = 0;  // whole tensors after the last whole list (a list cut short)
  std::size_t list_length = 0;     // tensors per list, as given or inferred (0: unknown)
  std::optional<FormatError>
      damage;  // why reading stopped before the end (offset(): where); nothing for an intact file

  [[nodiscard]] bool intact() const noexcept { return !damage && lost_tensors == 0; }
};

// Reads the whole lists of a .ten file up to its first damage (a cut chunk,
// a bad magic, a bad header), passing each to `each` in order, and reports
// where the good prefix ends. For an intact file this is what TenListReader
// reads. For a damaged one the list length is tensors_per_list, or the
// shortest period of the readable tensors' signatures once it has repeated
// (a cut recording of [images, labels] is read in pairs); with no repetition
// seen no list is known to be whole, and none is passed on. A tensor that
// breaks the inferred pattern counts as damage. Throws IoError (the file
// cannot be read), ArgumentError as TenListReader, and what `each` throws;
// never FormatError.
SalvageReport salvage_ten(const std::filesystem::path& path, std::size_t tensors_per_list,
                          const std::function<void(TensorList&&)>& each, const DecodeLimits& limits = {});

}  // namespace tensorcom
