// What servers, tools and pollers need of a Connection beyond sending and
// receiving batches, kept apart from the core API in connection.h (as
// cppzmq keeps zmq_addon.hpp apart from zmq.hpp): subscriber counts, peers
// dropped, waits that notice a stop request, the linger of a stopping
// sender, a descriptor for select/poll; and the one loop every sender uses
// to send without missing a stop signal. Thread safety: as the Connection's
// (one thread at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>

#include "tensorcom/transport/connection.h"

namespace tensorcom {

// The most a sender stopping on a signal waits to deliver queued batches
// (shorten_linger_for_stop).
inline constexpr Milliseconds kStopLinger{1000};

// ---- senders ----

// PUB: subscriptions currently held by peers (each SUB socket normally holds
// one); 0 for other kinds.
[[nodiscard]] std::uint64_t subscribers(Connection& connection);
// PUB: subscribers counted by peer: subscriptions, but at most the peers
// connected that have sent a handshake and a subscription's bytes (the
// kernel has them; ZeroMQ applies the subscription a moment later, so count
// again before relying on it). One SUB holding two topics, or an extra
// subscription, is one subscriber. A peer that connected without subscribing
// still counts while another holds two subscriptions.
[[nodiscard]] std::uint64_t subscribing_peers(Connection& connection);

// Senders: peers dropped for holding a connection without finishing its
// handshake (too many at once, or for more than 3 s), and for sending more
// than a sender's peer ever needs to (a subscription flood), and any bound
// socket's for coming while it held its most connections (half the
// descriptor limit, at most 512); see docs/security.md.
struct DroppedPeers {
  std::uint64_t unfinished = 0;
  std::uint64_t flooding = 0;
  std::uint64_t over_limit = 0;  // came while the socket held its most peers
  // Reconnections refused, in their handshake, from the address of a peer
  // dropped for flooding, for 10 s after (longer for an address that floods
  // again: docs/security.md).
  std::uint64_t refused_after_flooding = 0;
};
[[nodiscard]] DroppedPeers dropped_peers(const Connection& connection);
// PUB: batches send() did not send because no peer was subscribed.
[[nodiscard]] std::uint64_t dropped_without_subscriber(const Connection& connection) noexcept;
// CURVE server with allowed_clients: peers refused so far (each refusal is
// also logged through options().log, at the next send or receive).
[[nodiscard]] std::uint64_t refused_peers(const Connection& connection) noexcept;

// Senders (and ipc receivers): connections open now and lost so far, as
// ZeroMQ's monitor reports them (a sender's made or accepted connections,
// whether or not the peer finished its handshake). A connection lost may
// have taken the batches its queue held (docs/deploy.md, "Delivery").
struct ConnectionCount {
  std::uint64_t open = 0;
  std::uint64_t lost = 0;
};
[[nodiscard]] ConnectionCount connections(const Connection& connection) noexcept;

// Senders: waits until some connection is open, at most `timeout`, polling
// stop_requested (may be empty) every 50 ms. Returns: whether one is open.
bool wait_for_peer(Connection& connection, Milliseconds timeout, const std::function<bool()>& stop_requested);
// A PUSH that connects queues what it sends until its receiver is there,
// and one that never comes takes the queue with it at exit: such a sender
// waits for a receiver before its first batch, at most `wait`, telling
// `say` (may be empty) when it starts and every 10 s. Other senders, and a
// wait of 0, return at once. Returns: whether a receiver (or none needed)
// is there; false when the wait ran out or a stop came.
bool wait_for_receiver(Connection& connection, Milliseconds wait, const std::function<bool()>& stop_requested,
                       const std::function<void(std::string_view)>& say);

// PUB: waits at most timeout (none: forever) until some peer is subscribed.
// Returns: whether one is; true at once for other kinds. Throws
// TransportError (code() EINTR when a signal interrupted the wait).
bool wait_for_subscriber(Connection& connection, std::optional<Milliseconds> timeout);
// Waits at most timeout until a send would not block (a PUSH socket with no
// peer, or every peer's queue full, blocks). Returns: whether it would not;
// false also when a signal interrupted the wait. Throws TransportError for
// other failures.
bool wait_writable(Connection& connection, Milliseconds timeout);

// What send_until_stopped() waits for and how it looks for a stop.
struct StoppableSend {
  // Polled between waits (every `slice`): true ends the wait, nothing sent.
  std::function<bool()> stop_requested;
  // PUB: the batch waits until this many peers subscribe, counted by peer
  // (subscribing_peers; 0 or 1: any one). Other kinds: ignored.
  std::uint64_t subscribers = 1;
  // Told the subscriber count (by peer) at each look, for a gauge. May be
  // empty.
  std::function<void(std::uint64_t)> on_subscribers;
  Milliseconds slice{50};
};
// Sends one batch as Connection::send() does (without copying it), but
// never blocks past a stop request: a PUSH whose receivers are all gone or
// full, or a PUB with no subscriber (or fewer than how.subscribers), is
// waited on in slices that poll how.stop_requested, and the batch goes out
// only where try_send() takes it at once (a receiver may leave between the
// wait and the send; a PUB whose last subscriber left waits for another).
// Returns true once sent, false if a stop came first
// (a signal interrupting a wait counts as one when stop_requested says so).
// Throws TransportError; REQUIRES a PUSH or PUB connection.
bool send_until_stopped(Connection& connection, std::span<const Tensor> batch, const StoppableSend& how);

// What a program stopping on a signal leaves its sender before close(): PUB,
// whose slow subscribers miss batches anyway, closes at once; PUSH gets at
// most kStopLinger to deliver what is queued, so that a receiver that
// stopped reading cannot hold the stop. Nothing for receivers. Throws
// TransportError if closed.
void shorten_linger_for_stop(Connection& connection);

// ---- receivers ----

// A file descriptor for select/poll (pyzmq's Poller takes objects with
// fileno()), the same one for the connection's life: readable while a
// message may be received without waiting. Call it before each poll (it
// re-reads the socket's state; pyzmq and select do so); a wake-up can still
// be spurious when a message proves malformed. The first call starts a
// watcher thread. Owned by the connection.
[[nodiscard]] int poll_descriptor(Connection& connection);
// Whether a message is waiting (a malformed one would still be skipped).
[[nodiscard]] bool message_waiting(Connection& connection);

}  // namespace tensorcom
