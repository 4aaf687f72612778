// send_until_stopped: the one sending loop of every server and tool that
// must notice a stop request, and wait_for_peer (the rest of connection_controls.h is in
// connection.cc, beside the state it reads).
#include "tensorcom/transport/connection_controls.h"

#include <algorithm>
#include <cerrno>
#include <string>
#include <chrono>
#include <thread>

namespace tensorcom {

namespace {

bool stopping(const StoppableSend& how) { return how.stop_requested && how.stop_requested(); }

void tell_subscribers(Connection& connection, const StoppableSend& how) {
  if (how.on_subscribers) how.on_subscribers(subscribing_peers(connection));
}

// A peer counts once the kernel has its subscription's bytes; ZeroMQ
// applies the subscription a moment later. Counted again after a pause, so
// that a first batch does not go out before the last peer's subscription is
// in.
bool enough_subscribing_peers(Connection& connection, std::uint64_t needed) {
  constexpr std::chrono::milliseconds kSettle{200};
  if (subscribing_peers(connection) < needed) return false;
  std::this_thread::sleep_for(kSettle);
  return subscribing_peers(connection) >= needed;
}

// PUB: waits until how.subscribers peers subscribe (any one for 0 or 1);
// other kinds return at once. False if a stop came first.
bool await_subscribers(Connection& connection, const StoppableSend& how) {
  for (;;) {
    // Counted by peer: one peer holding two subscriptions is one subscriber.
    if (wait_for_subscriber(connection, how.slice) &&
        (how.subscribers <= 1 || enough_subscribing_peers(connection, how.subscribers))) {
      tell_subscribers(connection, how);
      return true;
    }
    tell_subscribers(connection, how);
    if (stopping(how)) return false;
    // Some subscribe, not yet enough: wait_for_subscriber returns at once.
    if (how.subscribers > 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

bool send_until_stopped(Connection& connection, std::span<const Tensor> batch, const StoppableSend& how) {
  try {
    for (;;) {
      // Nobody listening: wait rather than send to nobody (PUB would drop
      // every batch).
      if (!await_subscribers(connection, how)) return false;
      const Connection::Sent sent = connection.try_send(batch);
      if (sent == Connection::Sent::kYes) return true;
      if (stopping(how)) return false;
      // kNoSubscriber (the last one left since the wait): wait for another.
      if (sent == Connection::Sent::kWouldBlock) (void)wait_writable(connection, how.slice);
    }
  } catch (const TransportError& e) {
    if (e.code() == EINTR && stopping(how)) return false;
    throw;
  }
}

bool wait_for_peer(Connection& connection, Milliseconds timeout, const std::function<bool()>& stop_requested) {
  constexpr Milliseconds kSlice{50};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (connections(connection).open == 0) {
    if ((stop_requested && stop_requested()) || std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kSlice);
  }
  return true;
}

bool wait_for_receiver(Connection& connection, Milliseconds wait, const std::function<bool()>& stop_requested,
                       const std::function<void(std::string_view)>& say) {
  const auto& endpoints = connection.endpoints();
  const bool connects = std::any_of(endpoints.begin(), endpoints.end(),
                                    [](const Endpoint& e) { return e.kind == SocketKind::kPush && !e.bind; });
  if (wait.count() <= 0 || !connects || connections(connection).open > 0) return true;
  const auto tell = [&](const std::string& line) {
    if (say) say(line);
  };
  tell("waiting up to " + std::to_string(wait.count() / 1000) + " s for a receiver at " + connection.describe());
  constexpr Milliseconds kTellEvery{10000};
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const auto left = std::chrono::duration_cast<Milliseconds>(deadline - std::chrono::steady_clock::now());
    if (wait_for_peer(connection, std::min(left, kTellEvery), stop_requested)) return true;
    if ((stop_requested && stop_requested()) || std::chrono::steady_clock::now() >= deadline) return false;
    tell("still waiting for a receiver at " + connection.describe());
  }
}

}  // namespace tensorcom
