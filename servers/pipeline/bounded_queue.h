// A blocking FIFO between threads, bounded in items and optionally in bytes
// (as a weigh function counts them). close() ends it: push() then refuses,
// and pop() drains what is left before returning nothing.
//
// A producer that found the queue full sleeps until it is half empty, not
// until one item is gone: when producer and consumers share a core, waking
// the producer for every item costs two context switches per item.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

namespace tensorcom::pipeline {

template <class T>
class BoundedQueue {
 public:
  using Weigh = std::function<std::size_t(const T&)>;

  // max_bytes 0: no byte bound. An item heavier than max_bytes alone still
  // passes, once the queue is empty.
  explicit BoundedQueue(std::size_t capacity, std::size_t max_bytes = 0, Weigh weigh = {})
      : capacity_(capacity ? capacity : 1), max_bytes_(max_bytes), weigh_(std::move(weigh)) {}

  // Blocks while full; returns false (dropping value) once closed.
  bool push(T value) {
    const std::size_t bytes = weigh_ ? weigh_(value) : 0;
    std::unique_lock lock(mutex_);
    if (full(bytes)) {
      ++waiting_producers_;
      not_full_.wait(lock, [&] { return closed_ || half_empty(); });
      --waiting_producers_;
    }
    if (closed_) return false;
    items_.push_back({std::move(value), bytes});
    bytes_ += bytes;
    if (items_.size() == 1) not_empty_.notify_one();
    return true;
  }

  // Blocks while empty; nothing once closed and drained.
  std::optional<T> pop() {
    std::unique_lock lock(mutex_);
    if (items_.empty()) {
      ++waiting_consumers_;
      not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
      --waiting_consumers_;
    }
    if (items_.empty()) return std::nullopt;
    T value = std::move(items_.front().value);
    bytes_ -= items_.front().bytes;
    items_.pop_front();
    if (waiting_producers_ > 0 && half_empty()) not_full_.notify_all();
    // Several consumers: one woken by the first push passes the baton.
    if (waiting_consumers_ > 0 && !items_.empty()) not_empty_.notify_one();
    return value;
  }

  // Items queued now (for metrics).
  std::size_t size() {
    std::lock_guard lock(mutex_);
    return items_.size();
  }

  // Producers asleep on a full queue (for tests and diagnostics).
  std::size_t blocked_producers() {
    std::lock_guard lock(mutex_);
    return waiting_producers_;
  }

  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

 private:
  struct Item {
    T value;
    std::size_t bytes;
  };
  bool full(std::size_t incoming) const {
    return items_.size() >= capacity_ || (max_bytes_ && !items_.empty() && bytes_ + incoming > max_bytes_);
  }
  bool half_empty() const {
    return items_.size() <= capacity_ / 2 && (!max_bytes_ || items_.empty() || bytes_ <= max_bytes_ / 2);
  }

  std::size_t capacity_;
  std::size_t max_bytes_;
  Weigh weigh_;
  std::size_t bytes_ = 0;
  std::mutex mutex_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<Item> items_;
  std::size_t waiting_producers_ = 0;
  std::size_t waiting_consumers_ = 0;
  bool closed_ = false;
};

}  // namespace tensorcom::pipeline
