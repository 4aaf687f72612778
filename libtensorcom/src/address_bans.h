// Internal: addresses refused for a while, shared by a sending socket's
// PeerGuard (which bans a peer it drops for flooding, and drops the
// connections of banned addresses as they come) and its ZAP handler (which
// leaves their handshakes unanswered).
//
// Why both: a dropped ZeroMQ peer reconnects within its reconnect interval
// (100 ms by default) and subscribes again, and each drop of a peer with
// subscriptions costs libzmq a walk over every subscription the socket
// holds, on the publishing thread. Dropping the reconnection after accept
// alone is too late (its handshake and subscriptions may be processed
// before a monitor can act); a handshake left unanswered reads none of
// them. Refusing it in the handshake would be final instead: a ZeroMQ peer
// refused there never reconnects, and an honest one behind a flooder's
// address would be locked out for good. Dropped, it reconnects, and is
// served once the ban has ended.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace tensorcom::detail {

class AddressBans {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a flooder's address is refused at first. Refused reconnections
  // do not extend it: an honest program behind the same address gets back
  // in. An address that floods again once its ban has ended is refused
  // twice as long each time, up to kLongestBan (as fail2ban's increments),
  // so that a flooder that keeps coming back costs ever less; it is
  // forgiven kForgetAfter after its last ban ends.
  static constexpr std::chrono::seconds kBanTime{10};
  static constexpr std::chrono::seconds kLongestBan{160};
  static constexpr std::chrono::minutes kForgetAfter{10};
  // The most addresses held; a ban past them replaces the one ending first.
  static constexpr std::size_t kMaxAddresses = 4096;

  // Refuses `address` (as ZAP gives it: numeric, no port) from now on, for
  // kBanTime or longer (above). Another flood from the address while it is
  // banned (its connections made before the ban) changes nothing. An empty
  // address (ipc) is never banned.
  void ban(const std::string& address, Clock::time_point now);
  // Whether `address` is refused at `now`; counts the refusal if so.
  [[nodiscard]] bool refuses(const std::string& address, Clock::time_point now);
  // The same without counting (a refusal already counted elsewhere).
  [[nodiscard]] bool banned(const std::string& address, Clock::time_point now) const;
  // Connections refused so far.
  [[nodiscard]] std::uint64_t refused() const;
  // Bans so far (an address banned again counts again).
  [[nodiscard]] std::uint64_t bans() const;

 private:
  struct Ban {
    Clock::time_point until;
    int strikes = 0;  // bans in a row, each after the last one ended
  };
  void forget_forgiven(Clock::time_point now);

  mutable std::mutex mutex_;
  std::map<std::string, Ban> bans_by_address_;
  std::uint64_t refused_ = 0;
  std::uint64_t bans_ = 0;
};

// The numeric address of a connected socket's peer, as ZAP's requests give
// it ("127.0.0.1", "::1"; IPv4-mapped IPv6 as IPv4), or "" if it has none.
[[nodiscard]] std::string peer_address(int fd);

}  // namespace tensorcom::detail
