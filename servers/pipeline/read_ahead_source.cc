#include "read_ahead_source.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <set>
#include <thread>
#include <utility>

#include "bounded_queue.h"

namespace tensorcom::pipeline {

// One unit read ahead: a thread reading it into a queue bounded in bytes.
// The thread writes problem_ and error_ before it closes the queue; the
// reader looks at them only after joining it.
class ReadAheadSource::Unit {
 public:
  Unit(SampleSource& inner, std::size_t unit, bool images_later, std::size_t bytes)
      : images_later_(images_later),
        samples_(std::numeric_limits<std::size_t>::max(), bytes, [](const RawSample& s) { return buffered_bytes(s); }),
        thread_([this, &inner, unit] { read(inner, unit); }) {}
  ~Unit() { abandon(); }
  Unit(const Unit&) = delete;
  Unit& operator=(const Unit&) = delete;

  [[nodiscard]] bool images_later() const noexcept { return images_later_; }

  // Hands over the unit's samples in order; what the inner read returned.
  std::optional<std::string> hand_over(const std::function<bool(RawSample)>& take) {
    while (auto sample = samples_.pop()) {
      if (!take(std::move(*sample))) {
        abandon();
        return std::nullopt;
      }
    }
    thread_.join();
    if (error_) std::rethrow_exception(error_);
    return problem_;
  }

  // Stops the thread at its next sample, or within a transfer's or
  // command's wait for its peer (their cancellation poll), and waits for it.
  void abandon() {
    abandoned_.store(true, std::memory_order_relaxed);
    samples_.close();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void read(SampleSource& inner, std::size_t unit) {
    try {
      problem_ = inner.read(
          unit, [this](RawSample sample) { return samples_.push(std::move(sample)); }, images_later_,
          [this] { return abandoned_.load(std::memory_order_relaxed); });
    } catch (...) {
      error_ = std::current_exception();
    }
    samples_.close();
  }

  bool images_later_;
  std::atomic<bool> abandoned_{false};
  std::optional<std::string> problem_;
  std::exception_ptr error_;
  BoundedQueue<RawSample> samples_;
  std::thread thread_;  // last: starts once the rest is in place
};

ReadAheadSource::ReadAheadSource(SampleSource& inner, Options options) : inner_(inner), options_(options) {}

ReadAheadSource::~ReadAheadSource() = default;

void ReadAheadSource::will_read(std::span<const std::size_t> upcoming, bool images_later) {
  std::set<std::size_t> wanted;
  for (std::size_t i = 1; i < upcoming.size() && wanted.size() < options_.units; ++i) {
    if (inner_.is_remote(upcoming[i])) wanted.insert(upcoming[i]);
  }
  const std::size_t next = upcoming.empty() ? std::numeric_limits<std::size_t>::max() : upcoming.front();
  std::erase_if(ahead_, [&](const auto& entry) {
    return entry.first != next && (!wanted.contains(entry.first) || entry.second->images_later() != images_later);
  });
  const std::size_t share = std::max<std::uint64_t>(options_.bytes / std::max<std::size_t>(options_.units, 1), 1);
  for (std::size_t unit : wanted) {
    if (!ahead_.contains(unit)) ahead_.emplace(unit, std::make_unique<Unit>(inner_, unit, images_later, share));
  }
}

std::optional<std::string> ReadAheadSource::read(std::size_t unit, const std::function<bool(RawSample)>& take,
                                                 bool images_later, const std::function<bool()>& abandoned) {
  auto found = ahead_.find(unit);
  if (found == ahead_.end()) return inner_.read(unit, take, images_later, abandoned);
  std::unique_ptr<Unit> ahead = std::move(found->second);
  ahead_.erase(found);
  if (ahead->images_later() != images_later) {
    ahead->abandon();
    return inner_.read(unit, take, images_later, abandoned);
  }
  return ahead->hand_over(take);
}

}  // namespace tensorcom::pipeline
