// When a Connection keeps large message memory mapped between messages, and
// when it gives it back (see ConnectionOptions::reuse_receive_memory): a
// receiver keeps it from the start, a sender from its first send that
// copies a large batch; either returns what is free to the system when it
// has waited kIdleBeforeRelease for a message, after dropping an oversized
// message, and when it closes.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

#include "tensorcom/transport/connection.h"

namespace tensorcom::detail {

class ReceiveMemory {
 public:
  using Clock = std::chrono::steady_clock;
  // A receiver idle this long holds no batch memory it is not using.
  static constexpr Milliseconds kIdleBeforeRelease{1000};
  // Copies from this size up come from mmap in glibc's default settings.
  static constexpr std::uint64_t kLargeCopyBytes = 1 << 20;

  // reuse: the option; receives: a PULL or SUB connection (keeps at once).
  ReceiveMemory(bool reuse, bool receives);

  [[nodiscard]] bool keeps() const noexcept { return keeps_; }
  // Before a send: one that copies a large buffer starts keeping memory.
  void before_send(std::span<const Tensor> batch, Framing framing);
  // A message came: its memory is in use again.
  void message_received() noexcept { released_since_message_ = false; }
  // When a wait for the next message should stop to give memory back;
  // nothing if there is nothing to give (not keeping, or given since the
  // last message).
  [[nodiscard]] std::optional<Clock::time_point> release_due(Clock::time_point now) const noexcept;
  // Gives the free heap back to the system (an idle wait, a hostile size).
  void release();
  // At close: gives back what was kept.
  void close();

 private:
  bool reuse_;
  bool keeps_ = false;
  bool released_since_message_ = false;
};

}  // namespace tensorcom::detail
