// Internal: bounds what peers of a sending socket can hold before and after
// their handshake, from outside ZeroMQ (which has no per-connection limits).
//
// A sender's peers (SUB, PULL) send a greeting and a handshake, then only
// subscriptions and heartbeats. The kernel counts what each TCP connection
// has received (TCP_INFO), so without reading ZeroMQ's state:
// - a connection that has not received a whole handshake's bytes has
//   certainly not finished it: such connections are bounded in number
//   (kMaxUnfinished, the oldest dropped first) and in time (kHandshakeGrace);
//   an outside peer opening connections and sending nothing can no longer
//   take the process's descriptors;
// - a connection that has received more than kMaxReceivedBytes (plus a
//   heartbeat's allowance for its age) is flooding it with subscriptions:
//   dropped, which gives its subscriptions' memory back; and when the
//   socket holds too many subscriptions in all, the busiest peer is
//   (drop_busiest), so that slow flooders are bounded too;
// - connections accepted in all are bounded (max_peers, below the
//   descriptor limit: peer_limit()): a connection over the bound is
//   dropped as it comes, so that peers that finish a handshake and stay
//   silent cannot take the descriptors the program needs for its files.
// Dropping is shutdown(2) on the descriptor, which ZeroMQ owns and then
// closes as a peer that went away. ipc connections and connections this
// socket made itself are never dropped. Also counts the peers that are
// connected and have sent a handshake and a subscription, for counting
// subscribers by peer.
// Thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <optional>

namespace tensorcom::detail {

class AddressBans;

class PeerGuard {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxUnfinished = 64;
  static constexpr std::chrono::seconds kHandshakeGrace{3};
  static constexpr std::uint64_t kMaxReceivedBytes = 64 << 10;
  // A ZMTP PING is about 15 bytes: heartbeats every 100 ms fit with room.
  static constexpr std::uint64_t kHeartbeatBytesPerSecond = 256;
  // The fewest bytes a finished ZMTP 3 handshake takes (greeting and READY,
  // measured: 91 for a SUB, 92 for a PULL; with CURVE 551-552).
  static constexpr std::uint64_t kNullHandshakeBytes = 91;
  static constexpr std::uint64_t kCurveHandshakeBytes = 512;
  // A subscription to everything: 3 bytes in ZMTP 3.0, 12 in 3.1.
  static constexpr std::uint64_t kLeastSubscriptionBytes = 3;
  // Beyond a handshake, a subscription and heartbeats, what a peer may send
  // (a few topics) and still never be taken for the busiest.
  static constexpr std::uint64_t kSlackBytes = 1024;
  // The most connections a bound socket accepts, whatever the descriptor
  // limit: a subscribed peer that reads nothing costs about 250 KiB
  // (docs/security.md).
  static constexpr std::size_t kMaxPeers = 512;

  enum class Drop { kUnfinished, kFlooding, kOverLimit };

  struct Probe {
    // Bytes a connection has received; nothing if it is no TCP connection.
    std::function<std::optional<std::uint64_t>(int fd)> bytes_received;
    // Ends a connection.
    std::function<void(int fd)> drop;
    // Called before a connection is dropped for flooding (may be empty):
    // its address is refused for a while (address_bans.h).
    std::function<void(int fd)> banish;
    // Whether a connection just accepted comes from a banned address; may
    // be empty. Such a connection is dropped at once, before its handshake.
    std::function<bool(int fd)> refused;
  };

  // handshake_bytes: kNullHandshakeBytes or kCurveHandshakeBytes; 0 guards
  // nothing (a receiving socket, whose peers send batches), only counts
  // and bounds the number. max_peers: the most connections accepted at once.
  PeerGuard(std::uint64_t handshake_bytes, Probe probe, std::size_t max_peers = kMaxPeers);

  // A connection a bound socket accepted (a peer that may be hostile).
  void accepted(int fd, Clock::time_point now);
  // A connection this socket made (its peer was chosen: never dropped).
  void connected(int fd);
  void disconnected(int fd);
  // Drops what the bounds above say; cheap enough to run every few tens of
  // milliseconds.
  void sweep(Clock::time_point now);

  // Connections open that have sent at least a handshake and a
  // subscription (or are not guarded: ipc, made by the socket, a
  // receiver's).
  [[nodiscard]] std::uint64_t peers();
  // Drops the accepted TCP peer that has sent the most bytes a second over
  // its life beyond what a handshake, kSlackBytes and heartbeats explain (a
  // socket holding too many subscriptions in all: the likeliest flooder).
  // Does nothing while a dropped peer has not yet gone. Returns: whether it
  // dropped one.
  bool drop_busiest(Clock::time_point now);
  [[nodiscard]] std::uint64_t dropped(Drop reason) const;
  // Whether a peer was dropped for flooding since the last call: its
  // subscriptions' memory may be given back once ZeroMQ has let go of it.
  [[nodiscard]] bool take_flood_drop();

 private:
  struct Connection {
    Clock::time_point accepted_at;
    bool accepted = true;  // not made by this socket
    bool guarded = true;   // accepted TCP, not yet known to have finished
    bool finished = false;
    bool dropped = false;
    bool dropped_flooding = false;  // may still hold subscriptions
  };
  void drop(int fd, Connection& c, Drop reason);
  // Refreshes c.finished; returns the bytes received, if TCP.
  std::optional<std::uint64_t> probe(int fd, Connection& c);
  void drop_unfinished_over_cap();
  [[nodiscard]] std::size_t accepted_open() const;

  const std::uint64_t handshake_bytes_;
  const Probe probe_;
  const std::size_t max_peers_;
  mutable std::mutex mutex_;
  std::map<int, Connection> open_;
  std::array<std::uint64_t, 3> dropped_{};  // by Drop
  bool flood_drop_ = false;
};

// The bound on accepted connections for this process: half its descriptor
// limit (the metrics endpoint takes at most a quarter, the program's own
// files keep the rest), at most kMaxPeers, at least 1.
[[nodiscard]] std::size_t peer_limit();

// The Probe of real descriptors: TCP_INFO's tcpi_bytes_received, and
// shutdown(SHUT_RDWR); a flooder's address goes to `bans` (if any).
[[nodiscard]] PeerGuard::Probe tcp_probe(std::shared_ptr<AddressBans> bans = nullptr);

}  // namespace tensorcom::detail
