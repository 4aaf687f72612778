#include "peer_guard.h"

#include "address_bans.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace tensorcom::detail {

PeerGuard::PeerGuard(std::uint64_t handshake_bytes, Probe probe, std::size_t max_peers)
    : handshake_bytes_(handshake_bytes), probe_(std::move(probe)), max_peers_(max_peers) {}

std::size_t PeerGuard::accepted_open() const {
  return static_cast<std::size_t>(std::count_if(
      open_.begin(), open_.end(), [](const auto& entry) { return entry.second.accepted && !entry.second.dropped; }));
}

void PeerGuard::accepted(int fd, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  // Over the bound, the newcomer goes, as nginx and HAProxy refuse
  // connections past theirs: the peers already served keep their batches.
  const bool over_limit = accepted_open() >= max_peers_;
  open_[fd] = Connection{now};
  // A banned address's connection goes at once, as a lost one: its peer
  // reconnects, and is served once the ban ends (address_bans.h).
  if (probe_.refused && probe_.refused(fd)) {
    open_[fd].dropped = true;
    probe_.drop(fd);
    return;
  }
  if (over_limit) {
    drop(fd, open_[fd], Drop::kOverLimit);
    return;
  }
  if (handshake_bytes_ == 0) {
    open_[fd].guarded = false;
    open_[fd].finished = true;
    return;
  }
  // Each accept may be a flood's: bound the unfinished at once, not at the
  // next sweep, so that a burst of connections cannot reach the
  // descriptor limit in between.
  drop_unfinished_over_cap();
}

void PeerGuard::connected(int fd) {
  std::lock_guard lock(mutex_);
  open_[fd] = Connection{.accepted_at = {}, .accepted = false, .guarded = false, .finished = true};
}

void PeerGuard::disconnected(int fd) {
  std::lock_guard lock(mutex_);
  open_.erase(fd);
}

std::optional<std::uint64_t> PeerGuard::probe(int fd, Connection& c) {
  const std::optional<std::uint64_t> bytes = probe_.bytes_received(fd);
  if (!bytes) {
    c.guarded = false;  // not TCP: ipc is the machine's own users
    c.finished = true;
  } else if (*bytes >= handshake_bytes_) {
    c.finished = true;
  }
  return bytes;
}

void PeerGuard::drop(int fd, Connection& c, Drop reason) {
  c.dropped = true;
  if (reason == Drop::kFlooding && probe_.banish) probe_.banish(fd);
  probe_.drop(fd);
  ++dropped_[static_cast<std::size_t>(reason)];
  if (reason == Drop::kFlooding) {
    flood_drop_ = true;
    c.dropped_flooding = true;
  }
}

void PeerGuard::drop_unfinished_over_cap() {
  std::vector<std::pair<Clock::time_point, int>> unfinished;
  for (auto& [fd, c] : open_) {
    if (!c.guarded || c.dropped) continue;
    if (!c.finished) (void)probe(fd, c);
    if (c.guarded && !c.finished) unfinished.emplace_back(c.accepted_at, fd);
  }
  if (unfinished.size() <= kMaxUnfinished) return;
  std::sort(unfinished.begin(), unfinished.end());
  const std::size_t excess = unfinished.size() - kMaxUnfinished;
  for (std::size_t i = 0; i < excess; ++i) drop(unfinished[i].second, open_[unfinished[i].second], Drop::kUnfinished);
}

void PeerGuard::sweep(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  for (auto& [fd, c] : open_) {
    if (!c.guarded || c.dropped) continue;
    const std::optional<std::uint64_t> bytes = probe(fd, c);
    if (!bytes) continue;
    const auto age = now - c.accepted_at;
    if (!c.finished) {
      if (age > kHandshakeGrace) drop(fd, c, Drop::kUnfinished);
      continue;
    }
    const auto seconds = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(age).count());
    if (*bytes > kMaxReceivedBytes + kHeartbeatBytesPerSecond * seconds) drop(fd, c, Drop::kFlooding);
  }
  drop_unfinished_over_cap();
}

std::uint64_t PeerGuard::peers() {
  std::lock_guard lock(mutex_);
  std::uint64_t count = 0;
  for (auto& [fd, c] : open_) {
    if (c.dropped) continue;
    if (!c.guarded) {
      ++count;
      continue;
    }
    const std::optional<std::uint64_t> bytes = probe(fd, c);
    if (!bytes || *bytes >= handshake_bytes_ + kLeastSubscriptionBytes) ++count;
  }
  return count;
}

bool PeerGuard::drop_busiest(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  Connection* busiest = nullptr;
  int busiest_fd = -1;
  double busiest_rate = 0;
  for (auto& [fd, c] : open_) {
    // A peer dropped but not yet gone still holds its subscriptions: wait
    // for it rather than take the next peer for the same excess.
    if (c.dropped_flooding) return false;
    if (c.dropped || !c.guarded) continue;
    const std::optional<std::uint64_t> bytes = probe(fd, c);
    if (!bytes || !c.finished) continue;
    // What its handshake and heartbeats cannot explain: a peer holding one
    // subscription to everything has none, and is never taken.
    const auto age = now - c.accepted_at;
    const std::uint64_t explained =
        handshake_bytes_ + kLeastSubscriptionBytes + kSlackBytes +
        kHeartbeatBytesPerSecond * static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::seconds>(age).count());
    if (*bytes <= explained) continue;
    const double seconds = std::max(1e-3, std::chrono::duration<double>(age).count());
    const double rate = static_cast<double>(*bytes - explained) / seconds;
    if (rate > busiest_rate) {
      busiest = &c;
      busiest_fd = fd;
      busiest_rate = rate;
    }
  }
  if (!busiest) return false;
  drop(busiest_fd, *busiest, Drop::kFlooding);
  return true;
}

std::uint64_t PeerGuard::dropped(Drop reason) const {
  std::lock_guard lock(mutex_);
  return dropped_[static_cast<std::size_t>(reason)];
}

bool PeerGuard::take_flood_drop() {
  std::lock_guard lock(mutex_);
  return std::exchange(flood_drop_, false);
}

std::size_t peer_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return PeerGuard::kMaxPeers;
  return std::clamp<std::size_t>(limit.rlim_cur / 2, 1, PeerGuard::kMaxPeers);
}

PeerGuard::Probe tcp_probe(std::shared_ptr<AddressBans> bans) {
  std::function<void(int)> banish;
  std::function<bool(int)> refused;
  if (bans) {
    banish = [bans](int fd) { bans->ban(peer_address(fd), AddressBans::Clock::now()); };
    refused = [bans](int fd) { return bans->refuses(peer_address(fd), AddressBans::Clock::now()); };
  }
  return {[](int fd) -> std::optional<std::uint64_t> {
            tcp_info info{};
            socklen_t size = sizeof info;
            if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return std::nullopt;
            // A kernel too old to count received bytes cannot be guarded.
            if (size < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) return std::nullopt;
            return info.tcpi_bytes_received;
          },
          [](int fd) { (void)::shutdown(fd, SHUT_RDWR); }, std::move(banish), std::move(refused)};
}

}  // namespace tensorcom::detail
