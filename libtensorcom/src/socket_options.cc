#include "socket_options.h"

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

}  // namespace tensorcom::detail
