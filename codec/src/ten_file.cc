#include "tensorcom/ten_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
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
  FdCloser file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) throw IoError("cannot open '" + path.string() + "'", errno);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) throw IoError("cannot stat '" + path.string() + "'", errno);
  if (!S_ISREG(st.st_mode)) throw IoError("'" + path.string() + "' is not a regular file", EINVAL);
  auto size = static_cast<std::size_t>(st.st_size);
  std::byte* data = nullptr;
  if (size != 0) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd, 0);
    if (p == MAP_FAILED) throw IoError("cannot map '" + path.string() + "'", errno);
    data = static_cast<std::byte*>(p);
  }
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

// ---- reading ----

TensorList read_ten(const std::filesystem::path& path, const DecodeLimits& limits) {
  auto file = MappedFile::open(path);
  try {
    return decode_buffer(file->bytes(), file, limits);
  } catch (const FormatError& e) {
    throw e.with_context(path.string() + ": ");
  }
}

namespace {

bool same_signature(const Tensor& a, const Tensor& b) noexcept {
  if (a.dtype() != b.dtype() || a.info() != b.info() || a.ndim() != b.ndim()) return false;
  // The first dimension is the batch size, which the last batch may lack.
  for (std::size_t i = 1; i < a.ndim(); ++i) {
    if (a.shape()[i] != b.shape()[i]) return false;
  }
  return true;
}

}  // namespace

std::size_t infer_list_length(std::span<const Tensor> tensors) noexcept {
  const std::size_t n = tensors.size();
  for (std::size_t period = 1; period < n; ++period) {
    if (n % period != 0) continue;
    bool repeats = true;
    for (std::size_t i = period; i < n && repeats; ++i) repeats = same_signature(tensors[i], tensors[i % period]);
    if (repeats) return period;
  }
  return n;
}

std::vector<TensorList> split_lists(TensorList tensors, std::size_t tensors_per_list) {
  if (tensors_per_list == 0 || tensors.size() % tensors_per_list != 0) {
    throw FormatError(FormatErrorKind::kListLength, std::to_string(tensors.size()) + " tensors do not split into lists of " +
                          std::to_string(tensors_per_list),
                      0);
  }
  std::vector<TensorList> lists(tensors.size() / tensors_per_list);
  for (std::size_t i = 0; i < tensors.size(); ++i) lists[i / tensors_per_list].push_back(std::move(tensors[i]));
  return lists;
}

std::vector<TensorList> read_ten_lists(const std::filesystem::path& path, std::size_t tensors_per_list,
                                       const DecodeLimits& limits) {
  TensorList all = read_ten(path, limits);
  if (all.empty()) return {};
  std::size_t length = tensors_per_list == kInferListLength ? infer_list_length(all) : tensors_per_list;
  try {
    return split_lists(std::move(all), length);
  } catch (const FormatError& e) {
    throw e.with_context(path.string() + ": ");
  }
}

// ---- writing ----

TenWriter::TenWriter(const std::filesystem::path& path, Mode mode) : path_(path) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == Mode::kAppend ? O_APPEND : O_TRUNC);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) throw IoError("cannot create '" + path.string() + "'", errno);
}

TenWriter::TenWriter(TenWriter&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), bytes_written_(other.bytes_written_) {}

TenWriter& TenWriter::operator=(TenWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
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
  if (fd_ < 0) throw IoError("write to closed file '" + path_.string() + "'", EBADF);
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
  write_all(fd_, std::move(iov), path_);
  bytes_written_ += encoded_size(tensors);
}

void TenWriter::close() {
  if (fd_ < 0) return;
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw IoError("cannot close '" + path_.string() + "'", errno);
}

void write_ten(const std::filesystem::path& path, std::span<const Tensor> tensors) {
  TenWriter writer(path);
  writer.write(tensors);
  writer.close();
}

}  // namespace tensorcom
