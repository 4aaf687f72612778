// A blocking FIFO of bounded size between threads. close() ends it: push()
// then refuses, and pop() drains what is left before returning nothing.
//
// A producer that found the queue full sleeps until it is half empty, not
// until one item is gone: when producer and consumers share a core, waking
// the producer for every item costs two context switches per item.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace tensorcom::pipeline {

template <class T>
class BoundedQueue {
 public:
  explicit BoundedQueue(std::size_t capacity) : capacity_(capacity ? capacity : 1) {}

  // Blocks while full; returns false (dropping value) once closed.
  bool push(T value) {
    std::unique_lock lock(mutex_);
    if (items_.size() >= capacity_) {
      ++waiting_producers_;
      not_full_.wait(lock, [&] { return closed_ || items_.size() <= capacity_ / 2; });
      --waiting_producers_;
    }
    if (closed_) return false;
    items_.push_back(std::move(value));
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
    T value = std::move(items_.front());
    items_.pop_front();
    if (waiting_producers_ > 0 && items_.size() <= capacity_ / 2) not_full_.notify_all();
    // Several consumers: one woken by the first push passes the baton.
    if (waiting_consumers_ > 0 && !items_.empty()) not_empty_.notify_one();
    return value;
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
  std::size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;
  std::size_t waiting_producers_ = 0;
  std::size_t waiting_consumers_ = 0;
  bool closed_ = false;
};

}  // namespace tensorcom::pipeline
