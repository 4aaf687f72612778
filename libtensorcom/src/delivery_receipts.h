// Internal: a receiving Connection's side of confirmed delivery
// (tensorcom/transport/delivery.h). For each batch whose metadata asks, it
// sends a receipt to the sender's receipt socket and drops copies of a
// batch already taken (a sender re-sends what a lost connection may have
// dropped). It also notices one stream coming from two servers (same name
// and fingerprint: the same batches twice) and warns once, or, asked to be
// strict, refuses every batch from then on (a training run fed the same
// batches twice is better stopped than finished).
//
// Bounded against a hostile sender: at most kMaxSenders receipt sockets
// (further senders get no receipts, said once), at most kMaxRuns runs and
// kRememberedPerRun sequences a run remembered (the oldest forgotten first:
// a copy older than what is remembered is taken again, never lost), and a
// receipt goes only to the host the batch came from.
#pragma once

#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorcom/codec/metadata.h"
#include "tensorcom/codec/tensor.h"

namespace tensorcom::detail {

class DeliveryReceipts {
 public:
  static constexpr std::size_t kMaxSenders = 64;
  static constexpr std::size_t kMaxRuns = 256;
  static constexpr std::size_t kRememberedPerRun = 1 << 16;
  static constexpr std::size_t kMaxStreams = 1024;

  struct Policy {
    bool confirm = true;             // send receipts and drop copies
    bool refuse_duplicates = false;  // a stream from two servers: throw, not warn
  };

  // context: the receiving socket's; log: where the one-time warnings go.
  DeliveryReceipts(zmq::context_t& context, Policy policy, std::function<void(std::string_view)> log);

  // Looks at a received batch's metadata: sends its receipt if it asks for
  // one and remembers it. peer_address: the IP address the message came
  // from (empty when none), asked for only when a receipt goes out.
  // Returns false for a copy of a batch this receiver took before: the
  // caller drops it. Throws TransportError, with the strict policy, from
  // the first batch of a stream seen coming from two servers on.
  bool take(std::span<const Tensor> batch, const std::function<std::string()>& peer_address);

  // Copies dropped so far.
  [[nodiscard]] std::uint64_t duplicates() const noexcept { return duplicates_; }

  // Closes the receipt sockets (what is queued gets a short linger).
  void close();

 private:
  using Clock = std::chrono::steady_clock;
  struct Run {
    std::set<std::uint64_t> taken;
    Clock::time_point last_seen;
  };
  // A server seen sending a stream: its id (server and run) and when.
  struct StreamSource {
    std::string id;
    Clock::time_point first_seen;
    Clock::time_point last_seen;
  };

  bool first_time(std::uint64_t run, std::uint64_t sequence);
  void confirm(const DeliveryReceipt& receipt, std::uint64_t sequence, const std::string& peer_address);
  zmq::socket_t* receipt_socket(const DeliveryReceipt& receipt, std::string_view peer_address);
  void watch_stream(const BatchMetadata& metadata);
  void say_once(bool& said, const std::string& line);

  zmq::context_t& context_;
  Policy policy_;
  std::function<void(std::string_view)> log_;
  std::optional<std::string> refusal_;            // strict: why every batch is refused
  std::map<std::string, zmq::socket_t> sockets_;  // by endpoint
  std::map<std::uint64_t, Run> runs_;
  std::map<std::string, std::vector<StreamSource>> streams_;  // by name and fingerprint
  std::set<std::string> duplicate_streams_said_;
  std::optional<std::pair<std::string, std::string>> client_keys_;  // CURVE: public, secret
  std::uint64_t duplicates_ = 0;
  bool said_too_many_senders_ = false;
  bool said_unreachable_ = false;
};

}  // namespace tensorcom::detail
