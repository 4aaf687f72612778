#include "ipc_buffer_tuner.h"

#include <pthread.h>
#include <sys/socket.h>

#include <csignal>
#include <cerrno>
#include <string>
#include <string_view>

namespace tensorcom::detail {

namespace {

std::string next_monitor_address() {
  static std::atomic<unsigned long> counter{0};
  return "inproc://tensorcom-ipc-monitor-" + std::to_string(counter++);
}

}  // namespace

IpcBufferTuner::IpcBufferTuner(zmq::socket_t& socket, int bytes) : monitor_(bytes) {
  // init() must run on the socket's own thread; the monitor's PAIR socket then
  // belongs to the watching thread alone.
  monitor_.init(socket, next_monitor_address(), ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED);
  thread_ = std::thread([this] {
    // Signals are the application's threads' business, not this watcher's.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    constexpr int kPollMs = 20;  // bounds how long destruction waits
    while (!stop_.load(std::memory_order_relaxed)) {
      try {
        monitor_.check_event(kPollMs);
      } catch (const zmq::error_t& e) {
        // A signal (Ctrl-C ending a server) interrupts the poll: go on. Any
        // other error (the context ending) ends tuning, never the process.
        if (e.num() != EINTR) return;
      }
    }
  });
}

IpcBufferTuner::~IpcBufferTuner() {
  stop_ = true;
  thread_.join();
}

void IpcBufferTuner::Monitor::on_event_connected(const zmq_event_t& event, const char* address) {
  tune(event.value, address);
}

void IpcBufferTuner::Monitor::on_event_accepted(const zmq_event_t& event, const char* address) {
  tune(event.value, address);
}

void IpcBufferTuner::Monitor::tune(int fd, const char* address) const {
  if (!std::string_view(address).starts_with("ipc://")) return;
  // Failure leaves the default buffers: slower, not wrong.
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes_, sizeof bytes_);
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes_, sizeof bytes_);
}

}  // namespace tensorcom::detail
