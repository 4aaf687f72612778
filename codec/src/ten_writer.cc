#include "tensorcom/codec/ten_writer.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>
#include <vector>

#include "tensorcom/codec/error.h"
#include "tensorcom/codec/tenbin.h"

namespace tensorcom {

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

TenWriter::TenWriter(const std::filesystem::path& path, Mode mode) : path_(path) {
  if (mode == Mode::kReplace) {
    // A recording cut short keeps what it wrote, for salvage_ten.
    staged_.emplace(path, AtomicFile::IfAbandoned::kKeep);
    return;
  }
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == Mode::kAppend ? O_APPEND : O_TRUNC);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) throw IoError("cannot create '" + path.string() + "'", errno);
}

TenWriter::TenWriter(TenWriter&& other) noexcept
    : path_(std::move(other.path_)),
      staged_(std::exchange(other.staged_, std::nullopt)),
      fd_(std::exchange(other.fd_, -1)),
      bytes_written_(other.bytes_written_) {}

TenWriter& TenWriter::operator=(TenWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    staged_ = std::exchange(other.staged_, std::nullopt);
    fd_ = std::exchange(other.fd_, -1);
    bytes_written_ = other.bytes_written_;
  }
  return *this;
}

TenWriter::~TenWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TenWriter::write(std::span<const Tensor> tensors) {
  const int fd = staged_ ? staged_->fd() : fd_;
  if (fd < 0) throw IoError("write to closed file '" + temporary_path().string() + "'", EBADF);
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
  write_all(fd, std::move(iov), temporary_path());
  bytes_written_ += encoded_size(tensors);
}

void TenWriter::close() {
  if (staged_) {
    if (staged_->fd() < 0) return;
    staged_->commit();
    staged_.reset();
    return;
  }
  if (fd_ < 0) return;
  if (::close(std::exchange(fd_, -1)) != 0) throw IoError("cannot close '" + path_.string() + "'", errno);
}

void TenWriter::discard() noexcept {
  if (staged_) staged_->discard();
  staged_.reset();
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

void write_ten(const std::filesystem::path& path, std::span<const Tensor> tensors) {
  TenWriter writer(path);
  writer.write(tensors);
  writer.close();
}

}  // namespace tensorcom
