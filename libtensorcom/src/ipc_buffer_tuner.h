// Internal: socket buffers for ipc connections.
//
// ZeroMQ applies ZMQ_SNDBUF and ZMQ_RCVBUF to tcp connections only; ipc
// (Unix-domain) connections keep the kernel's default of about 200 KiB, which
// cuts a 38 MB batch into some two hundred reads, each after an epoll wakeup,
// and halves throughput. This watches a socket's new connections through
// ZeroMQ's monitor and sets both buffers on each ipc one.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <thread>

namespace tensorcom::detail {

class IpcBufferTuner {
 public:
  // Starts watching socket; bytes is the buffer size to set. The socket must
  // outlive this object.
  IpcBufferTuner(zmq::socket_t& socket, int bytes);
  ~IpcBufferTuner();
  IpcBufferTuner(const IpcBufferTuner&) = delete;
  IpcBufferTuner& operator=(const IpcBufferTuner&) = delete;

 private:
  class Monitor : public zmq::monitor_t {
   public:
    explicit Monitor(int bytes) : bytes_(bytes) {}
    void on_event_connected(const zmq_event_t& event, const char* address) override;
    void on_event_accepted(const zmq_event_t& event, const char* address) override;

   private:
    void tune(int fd, const char* address) const;
    int bytes_;
  };

  Monitor monitor_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tensorcom::detail
