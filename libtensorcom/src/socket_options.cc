#include "socket_options.h"

#include <malloc.h>

#include <mutex>

namespace tensorcom::detail {

zmq::socket_type zmq_type(SocketKind kind) noexcept {
  switch (kind) {
    case SocketKind::kPush: return zmq::socket_type::push;
    case SocketKind::kPull: return zmq::socket_type::pull;
    case SocketKind::kPub: return zmq::socket_type::pub;
    case SocketKind::kSub: return zmq::socket_type::sub;
  }
  return zmq::socket_type::pull;
}

void configure_socket(zmq::socket_t& socket, SocketKind kind, const ConnectionOptions& options) {
  socket.set(zmq::sockopt::linger, static_cast<int>(options.linger.count()));
  socket.set(zmq::sockopt::sndhwm, options.send_high_water_mark);
  socket.set(zmq::sockopt::rcvhwm, options.receive_high_water_mark);
  socket.set(zmq::sockopt::reconnect_ivl, static_cast<int>(options.reconnect.count()));
  socket.set(zmq::sockopt::reconnect_ivl_max, static_cast<int>(options.reconnect_max.count()));
  if (options.heartbeat.count() > 0) {
    auto timeout = options.heartbeat_timeout.count() > 0 ? options.heartbeat_timeout : 10 * options.heartbeat;
    socket.set(zmq::sockopt::heartbeat_ivl, static_cast<int>(options.heartbeat.count()));
    socket.set(zmq::sockopt::heartbeat_timeout, static_cast<int>(timeout.count()));
  }
  if (kind == SocketKind::kPull || kind == SocketKind::kSub) {
    // ZeroMQ checks this per frame, before allocating it.
    socket.set(zmq::sockopt::maxmsgsize, options.max_message_size);
  }
  // Applied by ZeroMQ to tcp only; IpcBufferTuner does it for ipc.
  socket.set(zmq::sockopt::sndbuf, kSocketBufferBytes);
  socket.set(zmq::sockopt::rcvbuf, kSocketBufferBytes);
}

void keep_large_buffers_mapped() {
  // ZeroMQ mallocs each received message. glibc serves blocks above its mmap
  // threshold (at most 32 MiB) with a fresh mmap and unmaps them on free, so
  // every 38 MB batch would be faulted in page by page: that, not the copy
  // from the socket, would bound throughput. Serving them from the heap and
  // never trimming it keeps the same pages in use from batch to batch.
  // ZeroMQ's I/O thread would get an arena of its own, whose extra heaps
  // glibc unmaps as soon as they are empty (whatever the trim threshold):
  // each batch freed would take its heap with it (measured: page faults were
  // a third of the receiving thread's time). One arena for every thread
  // avoids that; this must happen before ZeroMQ starts its threads.
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_ARENA_MAX, 1);
  });
}

}  // namespace tensorcom::detail
