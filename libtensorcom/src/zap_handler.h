// Internal: a ZeroMQ authentication (ZAP, RFC 27) handler. It leaves
// unanswered the handshakes of addresses a sending socket banned for
// flooding (address_bans.h; PeerGuard drops their connections), and, with
// an allow-list, CURVE clients whose public key is not on it, as CZMQ's
// zauth does with a certificate folder. One per ZeroMQ context, on a thread
// of its own; libzmq asks it during every CURVE handshake on that context's
// sockets, and during NULL handshakes on sockets with a ZAP domain.
#pragma once

#include <zmq.hpp>

#include <array>
#include <chrono>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "address_bans.h"

namespace tensorcom::detail {

class ZapHandler {
 public:
  // Binds the context's ZAP endpoint and starts answering. Without
  // allowed_z85_keys every CURVE key (and NULL) is let in; without bans no
  // address is refused.
  // Throws ArgumentError for a key that is not Z85, TransportError if the
  // endpoint cannot be bound.
  ZapHandler(zmq::context_t& context, const std::optional<std::vector<std::string>>& allowed_z85_keys,
             std::shared_ptr<AddressBans> bans);
  // Stops the thread and closes its socket (before the context closes).
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Peers refused by the allow-list so far (the bans count their own).
  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_; }
  // Lines describing refusals since the last call: each refusal's own line,
  // at most kLinesPerMinute a minute, then one line a minute saying how
  // many more there were (a peer retrying, or a flood, is not logged
  // connection by connection). Thread safe.
  [[nodiscard]] std::vector<std::string> take_lines();

 private:
  using Key = std::array<std::uint8_t, 32>;
  static constexpr std::size_t kLinesPerMinute = 16;

  void run();
  void answer(std::vector<zmq::message_t>& frames);
  void note_refusal(std::string line);

  zmq::socket_t socket_;
  std::optional<std::set<Key>> allowed_;  // none: any key
  std::shared_ptr<AddressBans> bans_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> refused_{0};
  std::mutex lines_mutex_;
  std::deque<std::string> lines_;
  std::chrono::steady_clock::time_point minute_start_{};  // of the current minute's lines
  std::size_t minute_lines_ = 0;                          // refusals noted in it

  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace tensorcom::detail
