// A PUB socket's subscriptions as its XPUB messages tell them (the socket is
// verbose: every subscription and unsubscription, a peer leaving included,
// comes up as a message), and the bound on what they may hold: ZeroMQ keeps
// every subscription in a trie of about 30 bytes a byte of topic, with no
// limit of its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tensorcom::detail {

class SubscriptionLedger {
 public:
  using Clock = std::chrono::steady_clock;
  // Topic bytes held in all past which the busiest peer is dropped.
  static constexpr std::uint64_t kMaxTopicBytes = 1 << 20;
  // At most one such drop in this time, while the unsubscriptions come back.
  static constexpr std::chrono::milliseconds kBetweenDrops{100};

  // Counts one XPUB message: 1 + topic subscribes, 0 + topic unsubscribes;
  // anything else (an empty message, other first bytes) is ignored.
  void take(std::span<const std::byte> message) noexcept;
  // Subscriptions held now.
  [[nodiscard]] std::uint64_t count() const noexcept { return subscriptions_; }
  // Their topics' bytes.
  [[nodiscard]] std::uint64_t topic_bytes() const noexcept { return topic_bytes_; }
  // Whether the busiest peer should be dropped at `now` (topics held past
  // kMaxTopicBytes, and no drop within kBetweenDrops); counts the drop.
  [[nodiscard]] bool drop_due(Clock::time_point now) noexcept;

 private:
  std::uint64_t subscriptions_ = 0;
  std::uint64_t topic_bytes_ = 0;
  Clock::time_point next_drop_{};
};

}  // namespace tensorcom::detail
