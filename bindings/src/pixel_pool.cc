#include "pixel_pool.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace tensorcom::python {

namespace {

// A block starts with its pixel bytes' count; pixels follow, 64-byte aligned.
constexpr std::size_t kHeader = 64;

class BlockPool {
 public:
  std::uint8_t* take(std::size_t bytes) {
    {
      std::lock_guard lock(mutex_);
      auto it = idle_.find(bytes);
      if (it != idle_.end() && !it->second.empty()) {
        void* block = it->second.back();
        it->second.pop_back();
        idle_bytes_ -= bytes;
        return static_cast<std::uint8_t*>(block) + kHeader;
      }
    }
    const std::size_t rounded = (kHeader + bytes + 63) / 64 * 64;
    void* block = std::aligned_alloc(64, rounded);
    if (block == nullptr) throw std::bad_alloc();
    std::memcpy(block, &bytes, sizeof bytes);
    return static_cast<std::uint8_t*>(block) + kHeader;
  }

  void give(void* pixels) {
    void* block = static_cast<std::uint8_t*>(pixels) - kHeader;
    std::size_t bytes = 0;
    std::memcpy(&bytes, block, sizeof bytes);
    std::vector<void*> evicted;
    {
      std::lock_guard lock(mutex_);
      // Room is made from blocks of other sizes first: outputs of one size
      // (a training crop) are the ones worth keeping.
      for (auto it = idle_.begin(); it != idle_.end() && idle_bytes_ + bytes > kMaxIdleBytes;) {
        if (it->first == bytes) {
          ++it;
          continue;
        }
        idle_bytes_ -= it->first * it->second.size();
        evicted.insert(evicted.end(), it->second.begin(), it->second.end());
        it = idle_.erase(it);
      }
      if (idle_bytes_ + bytes <= kMaxIdleBytes) {
        idle_[bytes].push_back(block);
        idle_bytes_ += bytes;
        block = nullptr;
      }
    }
    for (void* b : evicted) std::free(b);
    std::free(block);
  }

  std::size_t idle_bytes() {
    std::lock_guard lock(mutex_);
    return idle_bytes_;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> idle_;  // by pixel bytes
  std::size_t idle_bytes_ = 0;
};

// Never destroyed: arrays may be freed during the interpreter's teardown.
// A forked child starts a pool of its own, since another thread of the
// parent may have held the lock at the fork (its idle blocks are left).
std::atomic<BlockPool*> the_pool{nullptr};

BlockPool& pool() {
  static const bool registered = [] {
    the_pool.store(new BlockPool);
    pthread_atfork(nullptr, nullptr, [] { the_pool.store(new BlockPool); });
    return true;
  }();
  (void)registered;
  return *the_pool.load();
}

}  // namespace

py::array_t<std::uint8_t> pooled_rgb_array(std::size_t height, std::size_t width) {
  std::uint8_t* pixels = pool().take(height * width * 3);
  py::capsule owner(pixels, [](void* p) { pool().give(p); });
  return py::array_t<std::uint8_t>({static_cast<py::ssize_t>(height), static_cast<py::ssize_t>(width), py::ssize_t{3}},
                                   pixels, owner);
}

std::size_t pooled_idle_bytes() { return pool().idle_bytes(); }

}  // namespace tensorcom::python
