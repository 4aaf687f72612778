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
  forget_ended(now);
  const std::string key = without_mapping(address);
  if (until_.size() >= kMaxAddresses && !until_.contains(key)) {
    auto first_to_end = std::min_element(until_.begin(), until_.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
    until_.erase(first_to_end);
  }
  until_[key] = now + kBanTime;
  ++bans_;
}

bool AddressBans::refuses(const std::string& address, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (until_.empty()) return false;
  const auto it = until_.find(without_mapping(address));
  if (it == until_.end()) return false;
  if (now >= it->second) {
    until_.erase(it);
    return false;
  }
  ++refused_;
  return true;
}

std::uint64_t AddressBans::refused() const {
  std::lock_guard lock(mutex_);
  return refused_;
}

std::uint64_t AddressBans::bans() const {
  std::lock_guard lock(mutex_);
  return bans_;
}

void AddressBans::forget_ended(Clock::time_point now) {
  std::erase_if(until_, [&](const auto& entry) { return now >= entry.second; });
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
