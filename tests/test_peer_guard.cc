// PeerGuard's bounds, with a fake probe standing in for TCP_INFO and
// shutdown(2); the real descriptors are tests/security/'s business.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <algorithm>

#include <map>
#include <set>

#include "peer_guard.h"

using tensorcom::detail::PeerGuard;
using namespace std::chrono_literals;

namespace {

struct FakePeers {
  std::map<int, std::uint64_t> received;  // absent: not TCP
  std::set<int> dropped;
  std::set<int> banished;  // dropped for flooding: their addresses refused a while
  std::set<int> banned;    // connections coming from a banned address
  PeerGuard::Probe probe() {
    return {[this](int fd) -> std::optional<std::uint64_t> {
              auto it = received.find(fd);
              if (it == received.end()) return std::nullopt;
              return it->second;
            },
            [this](int fd) { dropped.insert(fd); },
            [this](int fd) {
              CHECK_FALSE(dropped.contains(fd));  // banished while its address can still be read
              banished.insert(fd);
            },
            [this](int fd) { return banned.contains(fd); }};
  }
};

constexpr std::uint64_t kHandshake = PeerGuard::kNullHandshakeBytes;

}  // namespace

TEST_CASE("connections that never finish their handshake are bounded in number, oldest dropped first") {
  FakePeers peers;
  PeerGuard guard(kHandshake, peers.probe());
  const auto t0 = PeerGuard::Clock::now();
  for (int fd = 100; fd < 100 + 200; ++fd) {
    peers.received[fd] = 0;  // a TCP connection that sent nothing
    guard.accepted(fd, t0 + std::chrono::milliseconds(fd));
  }
  CHECK(peers.dropped.size() == 200 - PeerGuard::kMaxUnfinished);
  CHECK(*peers.dropped.begin() == 100);
  CHECK(*peers.dropped.rbegin() == 100 + 200 - PeerGuard::kMaxUnfinished - 1);
  CHECK(guard.dropped(PeerGuard::Drop::kUnfinished) == 200 - PeerGuard::kMaxUnfinished);
  CHECK(guard.peers() == 0);
  CHECK(peers.banished.empty());  // a slow or broken peer is not a flooder
}

TEST_CASE("a peer past its handshake is never dropped as unfinished, and counts once it has subscribed") {
  FakePeers peers;
  PeerGuard guard(kHandshake, peers.probe());
  const auto t0 = PeerGuard::Clock::now();
  peers.received[5] = kHandshake;  // a PULL's greeting and READY, nothing since
  guard.accepted(5, t0);
  for (int fd = 10; fd < 10 + 100; ++fd) {
    peers.received[fd] = 10;  // part of a greeting
    guard.accepted(fd, t0 + 1ms);
  }
  CHECK_FALSE(peers.dropped.contains(5));
  guard.sweep(t0 + 1h);  // the others are long past the grace
  CHECK_FALSE(peers.dropped.contains(5));
  CHECK(peers.dropped.size() == 100);
  CHECK(guard.peers() == 0);  // no subscription yet
  peers.received[5] = kHandshake + PeerGuard::kLeastSubscriptionBytes;
  CHECK(guard.peers() == 1);
}

TEST_CASE("an unfinished handshake gets the grace, then is dropped") {
  FakePeers peers;
  PeerGuard guard(kHandshake, peers.probe());
  const auto t0 = PeerGuard::Clock::now();
  peers.received[7] = 64;  // a greeting alone
  guard.accepted(7, t0);
  guard.sweep(t0 + PeerGuard::kHandshakeGrace);
  CHECK(peers.dropped.empty());
  guard.sweep(t0 + PeerGuard::kHandshakeGrace + 1ms);
  CHECK(peers.dropped.contains(7));
}

TEST_CASE("a peer that sends more than subscriptions and heartbeats need is dropped as flooding") {
  FakePeers peers;
  PeerGuard guard(kHandshake, peers.probe());
  const auto t0 = PeerGuard::Clock::now();
  peers.received[3] = 200;
  peers.received[4] = 200;
  guard.accepted(3, t0);
  guard.accepted(4, t0);
  guard.sweep(t0 + 1s);
  CHECK(peers.dropped.empty());
  peers.received[3] = PeerGuard::kMaxReceivedBytes + 10 * PeerGuard::kHeartbeatBytesPerSecond;
  guard.sweep(t0 + 10s);  // within its allowance at ten seconds
  CHECK(peers.dropped.empty());
  guard.sweep(t0 + 9s);  // not at nine
  CHECK(peers.dropped == std::set<int>{3});
  CHECK(peers.banished == std::set<int>{3});
  CHECK(guard.take_flood_drop());
  CHECK_FALSE(guard.take_flood_drop());
  CHECK(guard.dropped(PeerGuard::Drop::kFlooding) == 1);
  CHECK(guard.peers() == 1);
  guard.disconnected(3);
  CHECK(guard.peers() == 1);
}

TEST_CASE("ipc connections, connections made by the socket itself, and receivers are not guarded") {
  FakePeers peers;
  PeerGuard guard(kHandshake, peers.probe());
  const auto t0 = PeerGuard::Clock::now();
  guard.accepted(1, t0);  // not TCP (ipc)
  peers.received[2] = 0;
  guard.connected(2);  // this socket's own connection
  guard.sweep(t0 + 1h);
  CHECK(peers.dropped.empty());
  CHECK(guard.peers() == 2);

  FakePeers batches;
  PeerGuard receiver(0, batches.probe());
  batches.received[9] = std::uint64_t{1} << 40;  // a server's batches
  receiver.accepted(9, t0);
  receiver.sweep(t0 + 1h);
  CHECK(batches.dropped.empty());
  CHECK(receiver.peers() == 1);
}

TEST_CASE("drop_busiest takes the peer sending most beyond heartbeats, one at a time, never an honest one") {
  FakePeers peers;
  PeerGuard guard(kHandshake, peers.probe());
  const auto t0 = PeerGuard::Clock::now();
  peers.received[1] = 50'000;  // an old trainer with days of heartbeats: many bytes, all explained
  guard.accepted(1, t0);
  peers.received[2] = 30'000;  // a young flooder
  guard.accepted(2, t0 + 9'000s);
  peers.received[3] = 10;  // unfinished
  guard.accepted(3, t0 + 9'000s);
  guard.accepted(4, t0 + 9'000s);       // ipc
  peers.received[5] = kHandshake + 12;  // a fresh subscriber to everything
  guard.accepted(5, t0 + 9'009s);
  CHECK(guard.drop_busiest(t0 + 9'010s));
  CHECK(peers.dropped == std::set<int>{2});
  CHECK_FALSE(guard.drop_busiest(t0 + 9'010s));  // 2 still holds its subscriptions
  guard.disconnected(2);
  CHECK_FALSE(guard.drop_busiest(t0 + 9'010s));  // nobody left sends more than it explains
  CHECK(peers.dropped == std::set<int>{2});
  peers.received[6] = 20'000;
  guard.accepted(6, t0 + 9'000s);
  CHECK(guard.drop_busiest(t0 + 9'010s));
  CHECK(peers.dropped == std::set<int>{2, 6});
  CHECK(peers.banished == std::set<int>{2, 6});
}

TEST_CASE("connections accepted past the bound are dropped as they come, whatever they sent") {
  FakePeers peers;
  constexpr std::size_t kBound = 8;
  PeerGuard guard(kHandshake, peers.probe(), kBound);
  const auto t0 = PeerGuard::Clock::now();
  peers.received[1] = 0;
  guard.connected(1);  // the socket's own connection counts for nothing
  for (int fd = 10; fd < 10 + 20; ++fd) {
    peers.received[fd] = kHandshake + 3;  // finished, subscribed, silent since
    guard.accepted(fd, t0);
  }
  CHECK(peers.dropped.size() == 20 - kBound);
  CHECK(*peers.dropped.begin() == 10 + static_cast<int>(kBound));  // the first served keep their place
  CHECK(guard.dropped(PeerGuard::Drop::kOverLimit) == 20 - kBound);
  CHECK(guard.peers() == kBound + 1);

  // A dropped connection's leaving makes no room: it never held one. A
  // served peer's does, and a newcomer takes it.
  for (int fd : peers.dropped) guard.disconnected(fd);
  guard.disconnected(10);
  peers.received[50] = kHandshake + 3;
  guard.accepted(50, t0 + 1s);
  CHECK_FALSE(peers.dropped.contains(50));
  peers.received[51] = kHandshake + 3;
  guard.accepted(51, t0 + 1s);
  CHECK(peers.dropped.contains(51));

  // Over-limit drops hold no subscriptions: drop_busiest need not wait.
  peers.received[11] = 1 << 20;
  CHECK(guard.drop_busiest(t0 + 2s));

  // A receiving socket's peers are bounded too.
  FakePeers servers;
  PeerGuard receiver(0, servers.probe(), 2);
  for (int fd = 1; fd <= 3; ++fd) receiver.accepted(fd, t0);
  CHECK(servers.dropped == std::set<int>{3});
}

TEST_CASE("a connection from a banned address is dropped as it comes, before any handshake") {
  FakePeers peers;
  PeerGuard guard(kHandshake, peers.probe());
  const auto t0 = PeerGuard::Clock::now();
  peers.banned = {7};
  peers.received[7] = 0;
  peers.received[8] = 0;
  guard.accepted(7, t0);
  guard.accepted(8, t0);
  CHECK(peers.dropped == std::set<int>{7});
  // Counted by the bans, not as one of the guard's own drops.
  for (auto reason : {PeerGuard::Drop::kUnfinished, PeerGuard::Drop::kFlooding, PeerGuard::Drop::kOverLimit}) {
    CHECK(guard.dropped(reason) == 0);
  }
}

TEST_CASE("the bound on peers is half the descriptor limit, at most kMaxPeers") {
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  const auto with_soft_limit = [&](rlim_t soft) {
    rlimit lowered = old;
    lowered.rlim_cur = std::min(soft, old.rlim_max);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    const std::size_t bound = tensorcom::detail::peer_limit();
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
    return bound;
  };
  CHECK(with_soft_limit(256) == 128);
  CHECK(with_soft_limit(1) == 1);
  if (old.rlim_max >= 4096) CHECK(with_soft_limit(4096) == PeerGuard::kMaxPeers);
}
