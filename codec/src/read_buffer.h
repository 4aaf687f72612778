// Memory that bytes read from a .ten file go to, mapped anonymously, and
// the pool that keeps it for the next list (see ReadBufferPool).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "tensorcom/codec/ten_file.h"

namespace tensorcom {

// A mapping of whole pages.
struct PageMapping {
  std::byte* data = nullptr;
  std::size_t length = 0;  // bytes mapped
};

// Free mappings kept for reuse, at most max_free_bytes of them. Shared by
// the pool, its readers and every buffer they gave out.
struct ReadBufferPool::State {
  explicit State(std::size_t max_free_bytes) : max_free_bytes(max_free_bytes) {}
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // A free mapping of exactly this length, if one is kept.
  [[nodiscard]] bool take(std::size_t length, PageMapping& out);
  // Keeps a mapping no longer used; false (the caller unmaps it) when it
  // would hold more than max_free_bytes.
  [[nodiscard]] bool keep(PageMapping mapping);
  [[nodiscard]] std::size_t free_bytes() const;

  const std::size_t max_free_bytes;
  mutable std::mutex mutex;
  std::vector<PageMapping> free;
  std::size_t free_total = 0;
};

namespace detail {

// Reading into fresh memory is bound by its page faults (one per 4 KiB
// page, and the kernel zeroing each page), which cost more than the copy
// itself; buffers of 2 MiB and more are therefore aligned to 2 MiB and
// advised for transparent huge pages (taken where the system's THP mode is
// "always" or "madvise"; elsewhere the advice is ignored), and a pool, when
// given, hands back the pages of a list already sent.
class ReadBuffer {
 public:
  // Throws IoError if the memory cannot be mapped. pool may be null.
  [[nodiscard]] static std::shared_ptr<const ReadBuffer> allocate(std::size_t size,
                                                                  std::shared_ptr<ReadBufferPool::State> pool);
  ~ReadBuffer();
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return mapping_.data; }
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {mapping_.data, size_}; }

 private:
  ReadBuffer(PageMapping mapping, std::size_t size, std::shared_ptr<ReadBufferPool::State> pool) noexcept
      : mapping_(mapping), size_(size), pool_(std::move(pool)) {}

  PageMapping mapping_;
  std::size_t size_;  // bytes asked for
  std::shared_ptr<ReadBufferPool::State> pool_;
};

}  // namespace detail
}  // namespace tensorcom
