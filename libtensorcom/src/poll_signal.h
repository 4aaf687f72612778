// Internal: a descriptor that polls readable exactly while a connection may
// have a batch to receive, the same descriptor for the connection's life
// (pyzmq's Poller and select() take objects by fileno()).
//
// ZeroMQ's own descriptor (ZMQ_FD) cannot serve: it signals that the
// socket's state changed, and stays quiet while batches that were already
// queued wait. So a watcher thread polls ZMQ_FD and raises an eventfd when
// it signals; the connection's thread, which alone may ask the socket
// (ZMQ_EVENTS), settles the eventfd from the answer and only then lets the
// watcher look again: no busy loop while a signal waits to be processed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace tensorcom::detail {

class PollSignal {
 public:
  // Starts watching zmq_fd (the socket's ZMQ_FD). Throws TransportError if
  // no descriptor or thread can be had.
  explicit PollSignal(int zmq_fd);
  PollSignal(const PollSignal&) = delete;
  PollSignal& operator=(const PollSignal&) = delete;
  // Stops and joins the watcher; call before the socket closes.
  ~PollSignal();

  [[nodiscard]] int fd() const noexcept { return signal_fd_; }

  // On the connection's thread, just after asking ZMQ_EVENTS: raises the
  // descriptor if a message waits, else lowers it and lets the watcher
  // wait for ZeroMQ's next signal.
  void settle(bool message_waiting);

 private:
  void watch();
  void raise_signal() const noexcept;
  void lower_signal() const noexcept;

  const int zmq_fd_;
  int signal_fd_ = -1;  // eventfd: readable while its counter is not 0
  int stop_fd_ = -1;    // eventfd: readable once the watcher must end
  std::mutex mutex_;
  std::condition_variable settled_;
  std::uint64_t generation_ = 0;  // settle() calls so far
  bool stopping_ = false;
  std::thread watcher_;  // last: starts once the rest exists
};

}  // namespace tensorcom::detail
