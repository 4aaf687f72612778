#include "tensorcom/ten_file.h"

#include "tensorcom/regular_file.h"

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

// ---- MappedFile ----

namespace {

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  const RegularFile file(path, ".ten file");
  auto size = static_cast<std::size_t>(file.size());
  std::byte* data = nullptr;
  if (size != 0) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd(), 0);
    if (p == MAP_FAILED) throw IoError("cannot map '" + path.string() + "'", errno);
    data = static_cast<std::byte*>(p);
  }
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

// ---- reading ----

namespace {

// What list-length inference compares: the first dimension is the batch
// size, which the last batch may lack.
struct Signature {
  DType dtype = DType::kUInt8;
  std::string info;
  Shape shape;
};

Signature signature_of(TensorHeader header) { return {header.dtype, std::move(header.info), std::move(header.shape)}; }

Signature signature_of(const Tensor& tensor) { return {tensor.dtype(), std::string(tensor.info()), tensor.shape()}; }

bool same_signature(const Signature& a, const Signature& b) noexcept {
  if (a.dtype != b.dtype || a.info != b.info || a.shape.size() != b.shape.size()) return false;
  return std::equal(a.shape.begin() + (a.shape.empty() ? 0 : 1), a.shape.end(),
                    b.shape.begin() + (b.shape.empty() ? 0 : 1));
}

// The shortest period of a sequence of signatures, grown one at a time: the
// failure function of Knuth-Morris-Pratt, so that a hostile file costs
// linear time.
class PeriodFinder {
 public:
  void add(Signature s) {
    const std::size_t i = signatures_.size();
    signatures_.push_back(std::move(s));
    std::size_t k = i == 0 ? 0 : border_[i - 1];
    while (k > 0 && !same_signature(signatures_[i], signatures_[k])) k = border_[k - 1];
    if (i > 0 && same_signature(signatures_[i], signatures_[k])) ++k;
    border_.push_back(k);
  }
  // Shortest p with s[i] == s[i - p] for every i >= p; 0 for none added.
  [[nodiscard]] std::size_t period() const noexcept { return size() - (border_.empty() ? 0 : border_.back()); }
  [[nodiscard]] std::size_t size() const noexcept { return signatures_.size(); }
  [[nodiscard]] const Signature& operator[](std::size_t i) const noexcept { return signatures_[i]; }
  // Keeps the first n signatures only; the finder is done with.
  void keep_first(std::size_t n) {
    signatures_.resize(std::min(n, signatures_.size()));
    signatures_.shrink_to_fit();
    border_.clear();
    border_.shrink_to_fit();
  }

 private:
  std::vector<Signature> signatures_;
  std::vector<std::size_t> border_;  // border_[i]: longest proper border of s[0..i]
};

// The old rule, for tensors that were all seen: the shortest period that
// divides the count, else the count. The shortest dividing period is the
// shortest period when that divides the count (Fine and Wilf: any other
// dividing period is a multiple of it), and there is none when it does not.
std::size_t whole_sequence_length(const PeriodFinder& finder) noexcept {
  const std::size_t n = finder.size(), p = finder.period();
  return p < n && n % p == 0 ? p : n;
}

// The list length of a file whose tensor headers are fed in order, as
// TenListReader and salvage_ten find it. Inferring, it holds signatures
// until the period is settled: once the tensors seen exceed max_tensors plus
// the period, a tensor breaking it would make the period (and so the
// lists) longer than max_tensors, so later tensors are only checked against
// it.
class ListPattern {
 public:
  ListPattern(std::size_t tensors_per_list, std::size_t max_tensors)
      : given_(tensors_per_list), max_tensors_(max_tensors) {}

  [[nodiscard]] bool inferring() const noexcept { return given_ == kInferListLength; }
  // Whether the length is known without seeing the rest of the file.
  [[nodiscard]] bool settled() const noexcept { return !inferring() || settled_; }
  // Feeds the next tensor; returns false if it breaks the settled pattern.
  bool add(Signature s) {
    const std::uint64_t index = seen_++;
    if (!inferring()) return true;
    if (settled_) return same_signature(s, finder_[index % finder_.size()]);
    finder_.add(std::move(s));
    if (finder_.size() - std::min(finder_.period(), max_tensors_) >= max_tensors_) {
      settled_ = true;
      finder_.keep_first(finder_.period());
    }
    return true;
  }
  // The length for reading: given, settled, or (the file ended before it
  // settled) the old rule over every tensor.
  [[nodiscard]] std::size_t length() const noexcept {
    if (!inferring()) return given_;
    return settled() ? finder_.size() : whole_sequence_length(finder_);
  }
  // The length for salvage: given, else the period once it has repeated;
  // an intact file whose tensors never repeat is one list, a damaged one
  // has none known to be whole (0).
  [[nodiscard]] std::size_t salvage_length(bool intact) const noexcept {
    if (!inferring() || settled()) return length();
    if (finder_.period() < finder_.size()) return finder_.period();
    return intact ? finder_.size() : 0;
  }
  // Tensors fed so far.
  [[nodiscard]] std::uint64_t seen() const noexcept { return seen_; }

 private:
  std::size_t given_;
  std::size_t max_tensors_;
  PeriodFinder finder_;  // once settled: the first period's signatures
  bool settled_ = false;
  std::uint64_t seen_ = 0;
};

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

}  // namespace

TensorList read_ten(const std::filesystem::path& path, const DecodeLimits& limits) {
  auto file = MappedFile::open(path);
  TensorDecoder decoder(file->bytes(), file, limits);
  TensorList tensors;
  try {
    while (auto tensor = decoder.next()) tensors.push_back(std::move(*tensor));
  } catch (const FormatError& e) {
    throw e.with_context(file_context(path));
  }
  return tensors;
}

struct TenListReader::State {
  std::filesystem::path path;
  std::shared_ptr<const MappedFile> file;
  ListPattern pattern;
  TensorDecoder decoder;
  std::size_t length = 0;
  std::uint64_t lists = 0;
};

TenListReader::TenListReader(const std::filesystem::path& path, std::size_t tensors_per_list,
                             const DecodeLimits& limits) {
  check_given_length(path, tensors_per_list, limits);
  auto file = MappedFile::open(path);
  ListPattern pattern(tensors_per_list, limits.max_tensors);
  try {
    // Headers only: the data is not touched until a list is read.
    TensorDecoder scan(file->bytes(), nullptr, limits);
    while (!pattern.settled()) {
      auto header = scan.next_header();
      if (!header) break;
      pattern.add(signature_of(std::move(*header)));
    }
    const std::size_t length = pattern.length();
    if (length > limits.max_tensors || (length == 0 && !scan.at_end())) throw list_too_long(length, limits.max_tensors);
  } catch (const FormatError& e) {
    throw e.with_context(file_context(path));
  }
  const std::size_t length = pattern.length();
  TensorDecoder decoder(file->bytes(), file, limits);
  state_ = std::make_unique<State>(State{path, std::move(file), std::move(pattern), std::move(decoder), length, 0});
}

TenListReader::TenListReader(TenListReader&&) noexcept = default;
TenListReader& TenListReader::operator=(TenListReader&&) noexcept = default;
TenListReader::~TenListReader() = default;

std::size_t TenListReader::list_length() const noexcept { return state_->length; }
std::uint64_t TenListReader::lists_read() const noexcept { return state_->lists; }

std::optional<TensorList> TenListReader::next() {
  State& s = *state_;
  if (s.length == 0 || s.decoder.at_end()) return std::nullopt;
  TensorList list;
  list.reserve(s.length);
  try {
    while (list.size() < s.length) {
      const std::uint64_t index = s.decoder.count(), offset = s.decoder.offset();
      auto tensor = s.decoder.next();
      if (!tensor) {
        throw FormatError(FormatErrorKind::kListLength,
                          std::to_string(index) + " tensors do not split into lists of " + std::to_string(s.length),
                          offset);
      }
      // Tensors the constructor saw were checked there.
      if (s.pattern.inferring() && index >= s.pattern.seen() && !s.pattern.add(signature_of(*tensor))) {
        throw breaks_pattern(index, s.length, offset);
      }
      list.push_back(std::move(*tensor));
    }
  } catch (const FormatError& e) {
    throw e.with_context(file_context(s.path));
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
  auto file = MappedFile::open(path);
  SalvageReport report;
  report.file_bytes = file->bytes().size();
  // First the headers, to where the damage starts: how many tensors are whole.
  ListPattern pattern(tensors_per_list, limits.max_tensors);
  TensorDecoder scan(file->bytes(), nullptr, limits);
  std::uint64_t readable = 0;
  try {
    for (;;) {
      const std::uint64_t offset = scan.offset();
      auto header = scan.next_header();
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
  TensorDecoder decoder(file->bytes(), file, limits);
  for (std::uint64_t l = 0; l < whole_lists; ++l) {
    TensorList list;
    list.reserve(length);
    for (std::size_t i = 0; i < length; ++i) list.push_back(*decoder.next());
    report.tensors += list.size();
    ++report.lists;
    each(std::move(list));
  }
  report.whole_bytes = decoder.offset();
  return report;
}

// ---- writing ----

namespace {

// A new file with a unique name PATH.XXXXXX.partial beside path, with the
// permissions open() would give it (mkstemp's are 0600).
int create_temporary(const std::filesystem::path& path, std::filesystem::path& name) {
  static constexpr std::string_view kSuffix = ".partial";
  std::string pattern = path.string() + ".XXXXXX" + std::string(kSuffix);
  int fd = ::mkostemps(pattern.data(), static_cast<int>(kSuffix.size()), O_CLOEXEC);
  if (fd < 0) throw IoError("cannot create a temporary file beside '" + path.string() + "'", errno);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  name = pattern;
  return fd;
}

// Makes a rename in `folder` durable; file systems that cannot sync a
// folder (EINVAL) keep it anyway.
void sync_folder(const std::filesystem::path& folder) {
  FdCloser dir{::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd < 0) throw IoError("cannot open folder '" + folder.string() + "'", errno);
  if (::fsync(dir.fd) != 0 && errno != EINVAL) throw IoError("cannot sync folder '" + folder.string() + "'", errno);
}

}  // namespace

TenWriter::TenWriter(const std::filesystem::path& path, Mode mode) : path_(path), writing_(path) {
  if (mode == Mode::kReplace) {
    fd_ = create_temporary(path, writing_);
    return;
  }
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == Mode::kAppend ? O_APPEND : O_TRUNC);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) throw IoError("cannot create '" + path.string() + "'", errno);
}

TenWriter::TenWriter(TenWriter&& other) noexcept
    : path_(std::move(other.path_)),
      writing_(std::move(other.writing_)),
      fd_(std::exchange(other.fd_, -1)),
      bytes_written_(other.bytes_written_) {}

TenWriter& TenWriter::operator=(TenWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    writing_ = std::move(other.writing_);
    fd_ = std::exchange(other.fd_, -1);
    bytes_written_ = other.bytes_written_;
  }
  return *this;
}

TenWriter::~TenWriter() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

constexpr std::array<std::byte, kChunkPadding> kZeros{};

// Gathers one chunk (prefix, payload, padding) as iovecs pointing at the
// caller's memory; prefix must outlive the write.
void add_chunk(std::vector<iovec>& iov, std::byte* prefix, std::span<const std::byte> payload) {
  std::memcpy(prefix, kTenbinMagic.data(), kTenbinMagic.size());
  auto length = static_cast<std::int64_t>(payload.size());
  std::memcpy(prefix + kTenbinMagic.size(), &length, sizeof length);
  iov.push_back({prefix, kChunkPrefixSize});
  if (!payload.empty()) iov.push_back({const_cast<std::byte*>(payload.data()), payload.size()});
  std::size_t padding = (kChunkPadding - payload.size() % kChunkPadding) % kChunkPadding;
  if (padding) iov.push_back({const_cast<std::byte*>(kZeros.data()), padding});
}

// writev() until every byte is out, resuming after short writes.
void write_all(int fd, std::vector<iovec> iov, const std::filesystem::path& path) {
  std::size_t first = 0;
  while (first < iov.size()) {
    int count = static_cast<int>(std::min<std::size_t>(iov.size() - first, IOV_MAX));
    ssize_t n = ::writev(fd, iov.data() + first, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError("cannot write '" + path.string() + "'", errno);
    }
    auto left = static_cast<std::size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
}

}  // namespace

void TenWriter::write(std::span<const Tensor> tensors) {
  if (fd_ < 0) throw IoError("write to closed file '" + writing_.string() + "'", EBADF);
  // Headers and prefixes are small: one block for all of them.
  std::size_t header_bytes = 0;
  for (const Tensor& t : tensors) header_bytes += header_size(t);
  std::vector<std::byte> scratch(header_bytes + 2 * kChunkPrefixSize * tensors.size());
  std::vector<iovec> iov;
  iov.reserve(6 * tensors.size());
  std::byte* p = scratch.data();
  for (const Tensor& t : tensors) {
    std::byte* prefix = p;
    std::byte* header = p + kChunkPrefixSize;
    std::size_t hsize = header_size(t);
    write_header(t, {header, hsize});
    add_chunk(iov, prefix, {header, hsize});
    std::byte* data_prefix = header + hsize;
    add_chunk(iov, data_prefix, t.bytes());
    p = data_prefix + kChunkPrefixSize;
  }
  write_all(fd_, std::move(iov), writing_);
  bytes_written_ += encoded_size(tensors);
}

void TenWriter::close() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  const bool replacing = writing_ != path_;
  // Synced before the rename: a crash after it must not leave path naming
  // a file whose data never reached the disk.
  if (replacing && ::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    throw IoError("cannot sync '" + writing_.string() + "'", error);
  }
  if (::close(fd) != 0) throw IoError("cannot close '" + writing_.string() + "'", errno);
  if (!replacing) return;
  if (::rename(writing_.c_str(), path_.c_str()) != 0) {
    throw IoError("cannot rename '" + writing_.string() + "' to '" + path_.string() + "'", errno);
  }
  writing_ = path_;
  sync_folder(path_.parent_path());
}

void TenWriter::discard() noexcept {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (writing_ != path_) ::unlink(writing_.c_str());
}

void write_ten(const std::filesystem::path& path, std::span<const Tensor> tensors) {
  TenWriter writer(path);
  writer.write(tensors);
  writer.close();
}

}  // namespace tensorcom
