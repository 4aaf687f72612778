#include "socket_monitor.h"

#include <pthread.h>
#include <sys/socket.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <string_view>
#include <utility>

#include "malloc_tuning.h"

namespace tensorcom::detail {

namespace {

std::string next_monitor_address() {
  static std::atomic<unsigned long> counter{0};
  return "inproc://tensorcom-monitor-" + std::to_string(counter++);
}

}  // namespace

SocketMonitor::SocketMonitor(zmq::socket_t& socket, int ipc_buffer_bytes, std::uint64_t handshake_bytes,
                             std::shared_ptr<AddressBans> bans, bool sends)
    : guard_(handshake_bytes, tcp_probe(std::move(bans)), peer_limit()), monitor_(ipc_buffer_bytes, guard_, sends) {
  // init() must run on the socket's own thread; the monitor's PAIR socket then
  // belongs to the watching thread alone (until stop() has joined it).
  monitor_.init(socket, next_monitor_address(), ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED);
  thread_ = std::thread([this] {
    // Signals are the application's threads' business, not this watcher's.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    constexpr int kPollMs = 20;  // bounds how long stop() waits
    while (!stop_.load(std::memory_order_relaxed)) {
      try {
        monitor_.check_event(kPollMs);
      } catch (const zmq::error_t& e) {
        // A signal (Ctrl-C ending a server) interrupts the poll: go on. Any
        // other error (the context ending) ends watching, never the process.
        if (e.num() != EINTR) return;
      }
      guard_peers();
    }
  });
}

void SocketMonitor::guard_peers() {
  constexpr std::chrono::milliseconds kSweepEvery{50};
  // A flooder's subscriptions are freed once ZeroMQ has seen it go (on the
  // socket's next send or receive); the heap is given back a second later.
  constexpr std::chrono::seconds kTrimAfter{1};
  const auto now = PeerGuard::Clock::now();
  if (now < next_sweep_) return;
  next_sweep_ = now + kSweepEvery;
  guard_.sweep(now);
  if (guard_.take_flood_drop()) trim_at_ = now + kTrimAfter;
  if (trim_at_ && now >= *trim_at_) {
    trim_at_.reset();
    return_free_memory();
  }
}

SocketMonitor::~SocketMonitor() { (void)stop(); }

bool SocketMonitor::wait_for_connection(std::chrono::milliseconds wait) const {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  // The watcher counts; polling its count keeps this free of locks.
  while (monitor_.connections.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return monitor_.connections.load() > 0;
}

std::uint64_t SocketMonitor::stop() {
  if (thread_.joinable()) {
    stop_ = true;
    thread_.join();
    // A peer that connected just before close still counts. Bounded: peers
    // that keep reconnecting (dropped floods) never let the queue run dry.
    constexpr int kMostEvents = 1024;
    try {
      for (int i = 0; i < kMostEvents && monitor_.check_event(0); ++i) {
      }
    } catch (const zmq::error_t&) {
      // The count so far stands.
    }
  }
  return monitor_.open.load();
}

HeldConnections SocketMonitor::take_held() {
  (void)stop();
  return std::move(monitor_.held);
}

void SocketMonitor::Monitor::on_event_connected(const zmq_event_t& event, const char* address) {
  ++connections;
  ++open;
  guard_.connected(event.value);
  opened(event.value, address);
}

void SocketMonitor::Monitor::on_event_accepted(const zmq_event_t& event, const char* address) {
  ++connections;
  ++open;
  guard_.accepted(event.value, PeerGuard::Clock::now());
  opened(event.value, address);
}

void SocketMonitor::Monitor::on_event_disconnected(const zmq_event_t& event, const char*) {
  guard_.disconnected(event.value);
  held.release(event.value);
  ++lost;
  // Only this watcher's thread writes the count: no race below zero.
  if (open.load() > 0) --open;
}

void SocketMonitor::Monitor::opened(int fd, const char* address) {
  if (!std::string_view(address).starts_with("ipc://")) return;
  // Failure leaves the default buffers: slower, not wrong.
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes_, sizeof bytes_);
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes_, sizeof bytes_);
  if (hold_) held.hold(fd);
}

}  // namespace tensorcom::detail
