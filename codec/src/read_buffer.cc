#include "read_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>

namespace tensorcom {

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kHugePage = 2u << 20;

std::size_t round_up(std::size_t n, std::size_t to) noexcept { return (n + to - 1) / to * to; }

// Whole pages, 2 MiB-aligned and advised for huge pages from 2 MiB up.
PageMapping map_pages(std::size_t length, bool huge) {
  const std::size_t slack = huge ? kHugePage : 0;
  void* p = ::mmap(nullptr, length + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw IoError("cannot map " + std::to_string(length) + " bytes to read a .ten file into", errno);
  auto* start = static_cast<std::byte*>(p);
  auto* data =
      reinterpret_cast<std::byte*>(round_up(reinterpret_cast<std::uintptr_t>(start), huge ? kHugePage : kPage));
  if (data != start) ::munmap(start, static_cast<std::size_t>(data - start));
  if (const std::size_t tail = static_cast<std::size_t>(start + length + slack - (data + length))) {
    ::munmap(data + length, tail);
  }
  if (huge) (void)::madvise(data, length, MADV_HUGEPAGE);
  return {data, length};
}

}  // namespace

ReadBufferPool::State::~State() {
  for (const PageMapping& mapping : free) ::munmap(mapping.data, mapping.length);
}

bool ReadBufferPool::State::take(std::size_t length, PageMapping& out) {
  const std::lock_guard lock(mutex);
  const auto found =
      std::find_if(free.begin(), free.end(), [length](const PageMapping& m) { return m.length == length; });
  if (found == free.end()) return false;
  out = *found;
  free.erase(found);
  free_total -= length;
  return true;
}

bool ReadBufferPool::State::keep(PageMapping mapping) {
  const std::lock_guard lock(mutex);
  if (free_total + mapping.length > max_free_bytes) return false;
  free.push_back(mapping);
  free_total += mapping.length;
  return true;
}

std::size_t ReadBufferPool::State::free_bytes() const {
  const std::lock_guard lock(mutex);
  return free_total;
}

ReadBufferPool::ReadBufferPool(std::size_t max_free_bytes) : state_(std::make_shared<State>(max_free_bytes)) {}

ReadBufferPool::~ReadBufferPool() = default;

std::size_t ReadBufferPool::free_bytes() const { return state_->free_bytes(); }

namespace detail {

std::shared_ptr<const ReadBuffer> ReadBuffer::allocate(std::size_t size, std::shared_ptr<ReadBufferPool::State> pool) {
  const bool huge = size >= kHugePage;
  const std::size_t length = round_up(std::max<std::size_t>(size, 1), huge ? kHugePage : kPage);
  PageMapping mapping;
  if (!pool || !pool->take(length, mapping)) mapping = map_pages(length, huge);
  return std::shared_ptr<const ReadBuffer>(new ReadBuffer(mapping, size, std::move(pool)));
}

ReadBuffer::~ReadBuffer() {
  if (pool_ && pool_->keep(mapping_)) return;
  ::munmap(mapping_.data, mapping_.length);
}

}  // namespace detail
}  // namespace tensorcom
