#include "address_bans.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace tensorcom::detail {

namespace {

constexpr std::string_view kMappedIpv4 = "::ffff:";

std::string without_mapping(std::string address) {
  if (address.starts_with(kMappedIpv4) && address.find('.') != std::string::npos) {
    address.erase(0, kMappedIpv4.size());
  }
  return address;
}

}  // namespace

void AddressBans::ban(const std::string& address, Clock::time_point now) {
  if (address.empty()) return;
  std::lock_guard lock(mutex_);
  forget_forgiven(now);
  const std::string key = without_mapping(address);
  if (bans_by_address_.size() >= kMaxAddresses && !bans_by_address_.contains(key)) {
    auto first_to_end = std::min_element(bans_by_address_.begin(), bans_by_address_.end(),
                                         [](const auto& a, const auto& b) { return a.second.until < b.second.until; });
    bans_by_address_.erase(first_to_end);
  }
  Ban& ban = bans_by_address_[key];
  if (now < ban.until) return;  // banned already
  ban.strikes += 1;
  const std::chrono::seconds length =
      std::min<std::chrono::seconds>(kBanTime * (1 << std::min(ban.strikes - 1, 8)), kLongestBan);
  ban.until = now + length;
  ++bans_;
}

bool AddressBans::refuses(const std::string& address, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (bans_by_address_.empty()) return false;
  const auto it = bans_by_address_.find(without_mapping(address));
  if (it == bans_by_address_.end() || now >= it->second.until) return false;
  ++refused_;
  return true;
}

bool AddressBans::banned(const std::string& address, Clock::time_point now) const {
  std::lock_guard lock(mutex_);
  const auto it = bans_by_address_.find(without_mapping(address));
  return it != bans_by_address_.end() && now < it->second.until;
}

std::uint64_t AddressBans::refused() const {
  std::lock_guard lock(mutex_);
  return refused_;
}

std::uint64_t AddressBans::bans() const {
  std::lock_guard lock(mutex_);
  return bans_;
}

void AddressBans::forget_forgiven(Clock::time_point now) {
  std::erase_if(bans_by_address_, [&](const auto& entry) { return now >= entry.second.until + kForgetAfter; });
}

std::string peer_address(int fd) {
  sockaddr_storage peer{};
  socklen_t size = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &size) != 0) return {};
  char text[INET6_ADDRSTRLEN] = {};
  if (peer.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&peer);
    if (::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text) == nullptr) return {};
  } else if (peer.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&peer);
    if (::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text) == nullptr) return {};
  } else {
    return {};  // ipc: nothing to ban
  }
  return without_mapping(text);
}

}  // namespace tensorcom::detail
