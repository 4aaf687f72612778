#include "subscription_ledger.h"

#include <algorithm>

namespace tensorcom::detail {

void SubscriptionLedger::take(std::span<const std::byte> message) noexcept {
  if (message.empty()) return;
  const std::uint64_t topic = message.size() - 1;
  if (message[0] == std::byte{1}) {
    ++subscriptions_;
    topic_bytes_ += topic;
  } else if (message[0] == std::byte{0}) {
    if (subscriptions_ > 0) --subscriptions_;
    topic_bytes_ -= std::min(topic_bytes_, topic);
  }
}

bool SubscriptionLedger::drop_due(Clock::time_point now) noexcept {
  if (topic_bytes_ <= kMaxTopicBytes || now < next_drop_) return false;
  next_drop_ = now + kBetweenDrops;
  return true;
}

}  // namespace tensorcom::detail
