// Internal: watches a socket's connections through ZeroMQ's monitor, for two
// reasons.
//
// Peers: close() lets queued batches linger only when some peer is
// connected (or connects within a short grace, as a connect still in
// progress does); with none, nothing could be delivered, and waiting the
// linger just delays the exit of a program that never found its server, or
// whose receivers have all gone.
//
// Hostile peers: a PeerGuard (peer_guard.h) bounds the connections a bound
// sender accepted that have not finished their handshake, and drops peers
// that flood it.
//
// Held ipc connections: a sending socket's ipc connections are held open
// past its close until their receivers have read them (held_connections.h).
//
// ipc buffers: ZeroMQ applies ZMQ_SNDBUF and ZMQ_RCVBUF to tcp connections
// only; ipc (Unix-domain) connections keep the kernel's default of about
// 200 KiB, which cuts a 38 MB batch into some two hundred reads, each after
// an epoll wakeup, and halves throughput. Each new ipc connection gets
// buffers of the given size.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "held_connections.h"
#include "peer_guard.h"

namespace tensorcom::detail {

class SocketMonitor {
 public:
  // Starts watching socket; ipc_buffer_bytes is the buffer size set on ipc
  // connections. The socket must outlive this object, and watching must
  // start before the socket binds or connects, or early peers are missed.
  // handshake_bytes: PeerGuard's, for the socket's security mechanism (0:
  // no guard, for receiving sockets). bans: where the addresses of peers
  // dropped for flooding go (may be null). sends: the socket sends, and its
  // ipc connections are held (take_held).
  SocketMonitor(zmq::socket_t& socket, int ipc_buffer_bytes, std::uint64_t handshake_bytes,
                std::shared_ptr<AddressBans> bans = nullptr, bool sends = false);
  ~SocketMonitor();
  SocketMonitor(const SocketMonitor&) = delete;
  SocketMonitor& operator=(const SocketMonitor&) = delete;

  // Waits at most `wait` for a first connection. Returns: whether one was made.
  bool wait_for_connection(std::chrono::milliseconds wait) const;

  // Stops watching and reads the events still queued. Returns: connections
  // open now (made or accepted, not yet lost). Idempotent.
  std::uint64_t stop();

  // After stop(): the ipc connections open now, held for the caller to
  // wait on once the socket has closed.
  HeldConnections take_held();

  // Connections open now, and lost since watching began (each one lost may
  // have dropped what its pipe held: confirmed delivery re-sends).
  [[nodiscard]] std::uint64_t open() const { return monitor_.open.load(); }
  [[nodiscard]] std::uint64_t lost() const { return monitor_.lost.load(); }

  // Peers connected and past their handshake (PeerGuard::peers()).
  [[nodiscard]] std::uint64_t peers() { return guard_.peers(); }
  [[nodiscard]] std::uint64_t dropped(PeerGuard::Drop reason) const { return guard_.dropped(reason); }
  bool drop_busiest_peer() { return guard_.drop_busiest(PeerGuard::Clock::now()); }

 private:
  class Monitor : public zmq::monitor_t {
   public:
    Monitor(int bytes, PeerGuard& guard, bool hold) : bytes_(bytes), guard_(guard), hold_(hold) {}
    void on_event_connected(const zmq_event_t& event, const char* address) override;
    void on_event_accepted(const zmq_event_t& event, const char* address) override;
    void on_event_disconnected(const zmq_event_t& event, const char* address) override;
    std::atomic<std::uint64_t> connections{0};  // ever made or accepted
    std::atomic<std::uint64_t> open{0};         // of them, not lost since
    std::atomic<std::uint64_t> lost{0};         // disconnections seen
    HeldConnections held;                       // the watcher's alone until stop()

   private:
    void opened(int fd, const char* address);
    int bytes_;
    PeerGuard& guard_;
    bool hold_;
  };

  void guard_peers();  // on the watcher's thread, between events

  PeerGuard guard_;
  Monitor monitor_;
  PeerGuard::Clock::time_point next_sweep_{};
  std::optional<PeerGuard::Clock::time_point> trim_at_;  // give back a flooder's memory then
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tensorcom::detail
