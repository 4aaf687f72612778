#include "tensorcom/codec/ten_file.h"

#include "list_pattern.h"
#include "read_buffer.h"
#include "tensorcom/codec/regular_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace tensorcom {

namespace {
using detail::ListPattern;
using detail::PeriodFinder;
using detail::ReadBuffer;
using detail::same_signature;
using detail::signature_of;
using detail::whole_sequence_length;

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// ---- the file, read with pread ----

// An open .ten file of the size it had when opened. Everything is read with
// pread into the caller's memory (see ten_file.h for why not mmap), so a
// file cut short under us gives a short read, reported here, never SIGBUS.
class TenFile {
 public:
  explicit TenFile(std::filesystem::path path) : path_(std::move(path)), file_(path_, ".ten file") {}

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  // The size at open; bytes appended since are not read.
  [[nodiscard]] std::uint64_t size() const noexcept { return file_.size(); }

  // Fills out from offset. Throws IoError naming the file if it ends sooner:
  // it was cut since it was opened.
  void read_exact(std::uint64_t offset, std::span<std::byte> out) const {
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::pread(file_.fd(), out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw IoError("cannot read '" + path_.string() + "'", errno);
      if (n == 0) throw shrank(offset + done);
      done += static_cast<std::size_t>(n);
    }
  }

  // The bytes [begin, end) in a page-aligned buffer of their own, from the
  // pool if one is given.
  [[nodiscard]] std::shared_ptr<const ReadBuffer> read_range(
      std::uint64_t begin, std::uint64_t end, std::shared_ptr<ReadBufferPool::State> pool = nullptr) const {
    auto buffer = ReadBuffer::allocate(static_cast<std::size_t>(end - begin), std::move(pool));
    read_exact(begin, buffer->bytes());
    return buffer;
  }

 private:
  [[nodiscard]] IoError shrank(std::uint64_t at) const {
    struct stat now {};
    const std::string size_now = ::fstat(file_.fd(), &now) == 0 ? std::to_string(now.st_size) : "fewer";
    return IoError("cannot read '" + path_.string() + "' at byte " + std::to_string(at) + ": it was cut from " +
                       std::to_string(size()) + " to " + size_now + " bytes while being read",
                   ENODATA);
  }

  std::filesystem::path path_;
  RegularFile file_;
};

// Where one tensor's chunks lie in the file.
struct TensorExtent {
  std::uint64_t offset = 0;         // its header chunk's prefix
  std::uint64_t header_offset = 0;  // the header payload
  std::size_t header_size = 0;
  std::uint64_t data_offset = 0;  // the data payload
  std::size_t data_size = 0;
  std::uint64_t end = 0;  // the next tensor's offset
};

// Walks the tensors of a TenFile by their chunk prefixes, reading no data
// payload; errors carry file offsets, as TensorDecoder's over the whole file.
class TensorWalker {
 public:
  explicit TensorWalker(const TenFile& file) : file_(&file) {}

  // The next tensor's extent, or nothing at the end. Throws FormatError
  // (the walker stays before the damaged tensor), IoError.
  [[nodiscard]] std::optional<TensorExtent> next_extent() {
    if (at_end()) return std::nullopt;
    TensorExtent e;
    e.offset = offset_;
    std::uint64_t at = offset_;
    const Chunk header = next_chunk(at);
    e.header_offset = header.payload_offset;
    e.header_size = header.length;
    if (at >= file_->size()) {
      throw FormatError(FormatErrorKind::kOddChunkCount,
                        "odd chunk count " + std::to_string(2 * count_ + 1) + ": the last header has no data chunk",
                        e.header_offset);
    }
    const Chunk data = next_chunk(at);
    e.data_offset = data.payload_offset;
    e.data_size = data.length;
    e.end = at;
    offset_ = at;
    ++count_;
    return e;
  }

  // As next_extent(), also reading and checking the tensor's header.
  [[nodiscard]] std::optional<TensorHeader> next_header(const DecodeLimits& limits) {
    const TensorWalker before = *this;
    auto e = next_extent();
    if (!e) return std::nullopt;
    try {
      // decode_header reads no more than 8 * (3 + max_ndim) bytes: a header
      // chunk declaring more is not read whole.
      std::vector<std::byte> header(std::min<std::size_t>(e->header_size, 8 * (3 + limits.max_ndim)));
      file_->read_exact(e->header_offset, header);
      return decode_tensor_header(count_ - 1, header, e->header_offset, e->data_size, e->data_offset, limits);
    } catch (...) {
      *this = before;
      throw;
    }
  }

  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  [[nodiscard]] bool at_end() const noexcept { return offset_ >= file_->size(); }

 private:
  struct Chunk {
    std::uint64_t payload_offset;
    std::size_t length;
  };
  // Reads and checks the prefix of the chunk at `at` and moves `at` past
  // the chunk (its padding may be missing at the very end, as ChunkReader
  // allows).
  Chunk next_chunk(std::uint64_t& at) const {
    const std::uint64_t remaining = file_->size() - at;
    std::array<std::byte, kChunkPrefixSize> prefix{};
    const auto have = static_cast<std::size_t>(std::min<std::uint64_t>(remaining, kChunkPrefixSize));
    file_->read_exact(at, std::span(prefix).first(have));
    const Chunk chunk{at + kChunkPrefixSize, chunk_payload_length(std::span(prefix).first(have), remaining, at)};
    at = std::min<std::uint64_t>(file_->size(), at + chunk_size(chunk.length));
    return chunk;
  }

  const TenFile* file_;
  std::uint64_t offset_ = 0;
  std::uint64_t count_ = 0;
};

// ---- reading ----

FormatError breaks_pattern(std::uint64_t index, std::size_t length, std::uint64_t offset) {
  return FormatError(FormatErrorKind::kListLength,
                     "tensor " + std::to_string(index) + ": its dtype, info or shape breaks the pattern of lists of " +
                         std::to_string(length) + " found in the tensors before it (give the list length)",
                     offset);
}

FormatError list_too_long(std::size_t length, std::size_t max_tensors) {
  return FormatError(FormatErrorKind::kTooManyTensors,
                     "lists of " + std::to_string(length) + " tensors exceed the limit of " +
                         std::to_string(max_tensors) + " (give the list length)",
                     0);
}

std::string file_context(const std::filesystem::path& path) { return path.string() + ": "; }

void check_given_length(const std::filesystem::path& path, std::size_t tensors_per_list, const DecodeLimits& limits) {
  if (tensors_per_list != kInferListLength && tensors_per_list > limits.max_tensors) {
    throw ArgumentError(file_context(path) + "lists of " + std::to_string(tensors_per_list) +
                        " tensors exceed the limit of " + std::to_string(limits.max_tensors));
  }
}

// The extents of the next `length` tensors. Throws FormatError for a list
// cut short by the end of the file (offset: where its tensors end), and as
// TensorWalker.
std::vector<TensorExtent> next_list_extents(TensorWalker& walker, std::size_t length) {
  std::vector<TensorExtent> extents;
  extents.reserve(length);
  while (extents.size() < length) {
    const std::uint64_t index = walker.count(), offset = walker.offset();
    auto extent = walker.next_extent();
    if (!extent) {
      throw FormatError(FormatErrorKind::kListLength,
                        std::to_string(index) + " tensors do not split into lists of " + std::to_string(length),
                        offset);
    }
    extents.push_back(*extent);
  }
  return extents;
}

// Reads consecutive tensors into one buffer of their own and returns views
// into it; first_index is the first one's index in the file. Chunks start
// at multiples of 64 from the file's start and so from the (page-aligned)
// buffer's, which leaves every data payload 16-byte aligned, as a mapping
// of the file would. Throws
// FormatError (the file's offsets), IoError.
TensorList read_tensors(const TenFile& file, std::span<const TensorExtent> extents, std::uint64_t first_index,
                        const DecodeLimits& limits, std::shared_ptr<ReadBufferPool::State> pool) {
  const std::uint64_t begin = extents.front().offset;
  const auto buffer = file.read_range(begin, extents.back().end, std::move(pool));
  TensorList tensors;
  tensors.reserve(extents.size());
  for (std::size_t i = 0; i < extents.size(); ++i) {
    const TensorExtent& e = extents[i];
    std::byte* data = buffer->data() + (e.data_offset - begin);
    TensorHeader h =
        decode_tensor_header(first_index + i, buffer->bytes().subspan(e.header_offset - begin, e.header_size),
                             e.header_offset, e.data_size, e.data_offset, limits);
    tensors.push_back(Tensor::view(h.dtype, std::move(h.shape), data, buffer, h.info));
  }
  return tensors;
}

}  // namespace

TensorList read_ten(const std::filesystem::path& path, const DecodeLimits& limits) {
  const TenFile file(path);
  const auto buffer = file.read_range(0, file.size());
  TensorDecoder decoder(buffer->bytes(), buffer, limits);
  TensorList tensors;
  try {
    while (auto tensor = decoder.next()) tensors.push_back(std::move(*tensor));
  } catch (const FormatError& e) {
    throw e.with_context(file_context(path));
  }
  return tensors;
}

struct TenListReader::State {
  State(const std::filesystem::path& path, ListPattern pattern)
      : file(path), walker(file), pattern(std::move(pattern)) {}

  TenFile file;
  TensorWalker walker;  // reads `file`: State never moves (held by unique_ptr)
  ListPattern pattern;
  std::size_t length = 0;
  std::uint64_t lists = 0;
  std::shared_ptr<ReadBufferPool::State> pool;  // null: fresh memory a list
  DecodeLimits limits;
};

TenListReader::TenListReader(const std::filesystem::path& path, std::size_t tensors_per_list,
                             const DecodeLimits& limits, const ReadBufferPool* pool) {
  check_given_length(path, tensors_per_list, limits);
  state_ = std::make_unique<State>(path, ListPattern(tensors_per_list, limits.max_tensors));
  State& s = *state_;
  s.limits = limits;
  if (pool) s.pool = pool->state();
  try {
    // Headers only: no data is read until a list is.
    TensorWalker scan(s.file);
    while (!s.pattern.settled()) {
      auto header = scan.next_header(limits);
      if (!header) break;
      s.pattern.add(signature_of(std::move(*header)));
    }
    s.length = s.pattern.length();
    if (s.length > limits.max_tensors || (s.length == 0 && !scan.at_end())) {
      throw list_too_long(s.length, limits.max_tensors);
    }
  } catch (const FormatError& e) {
    throw e.with_context(file_context(path));
  }
}

TenListReader::TenListReader(TenListReader&&) noexcept = default;
TenListReader& TenListReader::operator=(TenListReader&&) noexcept = default;
TenListReader::~TenListReader() = default;

std::size_t TenListReader::list_length() const noexcept { return state_->length; }
std::uint64_t TenListReader::lists_read() const noexcept { return state_->lists; }

std::optional<TensorList> TenListReader::next() {
  State& s = *state_;
  if (s.length == 0 || s.walker.at_end()) return std::nullopt;
  const std::uint64_t first = s.walker.count();
  TensorList list;
  try {
    const std::vector<TensorExtent> extents = next_list_extents(s.walker, s.length);
    list = read_tensors(s.file, extents, first, s.limits, s.pool);
    // Tensors the constructor saw were checked there.
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::uint64_t index = first + i;
      if (s.pattern.inferring() && index >= s.pattern.seen() && !s.pattern.add(signature_of(list[i]))) {
        throw breaks_pattern(index, s.length, extents[i].offset);
      }
    }
  } catch (const FormatError& e) {
    throw e.with_context(file_context(s.file.path()));
  }
  ++s.lists;
  return list;
}

std::vector<TensorList> read_ten_lists(const std::filesystem::path& path, std::size_t tensors_per_list,
                                       const DecodeLimits& limits) {
  TenListReader reader(path, tensors_per_list, limits);
  std::vector<TensorList> lists;
  while (auto list = reader.next()) lists.push_back(std::move(*list));
  return lists;
}

std::size_t infer_list_length(std::span<const Tensor> tensors) {
  PeriodFinder finder;
  for (const Tensor& t : tensors) finder.add(signature_of(t));
  return whole_sequence_length(finder);
}

std::vector<TensorList> split_lists(TensorList tensors, std::size_t tensors_per_list) {
  if (tensors_per_list == 0 || tensors.size() % tensors_per_list != 0) {
    throw FormatError(
        FormatErrorKind::kListLength,
        std::to_string(tensors.size()) + " tensors do not split into lists of " + std::to_string(tensors_per_list), 0);
  }
  std::vector<TensorList> lists(tensors.size() / tensors_per_list);
  for (std::size_t i = 0; i < tensors.size(); ++i) lists[i / tensors_per_list].push_back(std::move(tensors[i]));
  return lists;
}

SalvageReport salvage_ten(const std::filesystem::path& path, std::size_t tensors_per_list,
                          const std::function<void(TensorList&&)>& each, const DecodeLimits& limits) {
  check_given_length(path, tensors_per_list, limits);
  const TenFile file(path);
  SalvageReport report;
  report.file_bytes = file.size();
  // First the headers, to where the damage starts: how many tensors are whole.
  ListPattern pattern(tensors_per_list, limits.max_tensors);
  TensorWalker scan(file);
  std::uint64_t readable = 0;
  try {
    for (;;) {
      const std::uint64_t offset = scan.offset();
      auto header = scan.next_header(limits);
      if (!header) break;
      if (!pattern.add(signature_of(std::move(*header)))) {
        report.damage = breaks_pattern(readable, pattern.length(), offset);
        break;
      }
      ++readable;
    }
  } catch (const FormatError& e) {
    report.damage = e;
  }
  std::size_t length = pattern.salvage_length(!report.damage);
  if (length > limits.max_tensors) {
    if (!report.damage) report.damage = list_too_long(length, limits.max_tensors);
    length = 0;
  }
  report.list_length = length;
  const std::uint64_t whole_lists = length == 0 ? 0 : readable / length;
  report.lost_tensors = readable - whole_lists * length;
  // Then the whole lists, one at a time.
  TensorWalker walker(file);
  for (std::uint64_t l = 0; l < whole_lists; ++l) {
    const std::uint64_t first = walker.count();
    TensorList list = read_tensors(file, next_list_extents(walker, length), first, limits, nullptr);
    report.tensors += list.size();
    ++report.lists;
    each(std::move(list));
  }
  report.whole_bytes = walker.offset();
  return report;
}

}  // namespace tensorcom
