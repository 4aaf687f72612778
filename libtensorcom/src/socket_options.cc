#include "socket_options.h"

namespace tensorcom::detail {

zmq::socket_type zmq_type(SocketKind kind) noexcept {
  switch (kind) {
    case SocketKind::kPush: return zmq::socket_type::push;
    case SocketKind::kPull: return zmq::socket_type::pull;
    // XPUB speaks PUB's protocol to SUB peers and shows us their
    // subscriptions, so that a server knows whether anyone listens.
    case SocketKind::kPub: return zmq::socket_type::xpub;
    case SocketKind::kSub: return zmq::socket_type::sub;
  }
  return zmq::socket_type::pull;
}

void configure_curve(zmq::socket_t& socket, const CurveSecurity& curve) {
  if (curve.keys.secret_key.empty()) throw ArgumentError("CURVE needs this side's secret key");
  // Keys of 40 characters are taken as Z85 by ZeroMQ.
  socket.set(zmq::sockopt::curve_secretkey, curve.keys.secret_key);
  socket.set(zmq::sockopt::curve_publickey, curve.keys.public_key);
  if (curve.server_public_key.empty()) {
    socket.set(zmq::sockopt::curve_server, true);
    // A domain makes ZeroMQ ask the context's ZAP handler (if any) about every client.
    socket.set(zmq::sockopt::zap_domain, "tensorcom");
  } else {
    socket.set(zmq::sockopt::curve_serverkey, curve.server_public_key);
  }
}

void configure_socket(zmq::socket_t& socket, SocketKind kind, const ConnectionOptions& options) {
  socket.set(zmq::sockopt::linger, static_cast<int>(options.linger.count()));
  socket.set(zmq::sockopt::sndhwm, options.send_high_water_mark);
  socket.set(zmq::sockopt::rcvhwm, options.receive_high_water_mark);
  socket.set(zmq::sockopt::reconnect_ivl, static_cast<int>(options.reconnect.count()));
  socket.set(zmq::sockopt::reconnect_ivl_max, static_cast<int>(options.reconnect_max.count()));
  // A peer that connects and never completes its greeting holds a
  // descriptor: dropped after kHandshakeMs (ZeroMQ's default is 30 s).
  socket.set(zmq::sockopt::handshake_ivl, kHandshakeMs);
  if (options.heartbeat.count() > 0) {
    auto timeout = options.heartbeat_timeout.count() > 0 ? options.heartbeat_timeout : 10 * options.heartbeat;
    socket.set(zmq::sockopt::heartbeat_ivl, static_cast<int>(options.heartbeat.count()));
    socket.set(zmq::sockopt::heartbeat_timeout, static_cast<int>(timeout.count()));
  }
  if (kind == SocketKind::kPull || kind == SocketKind::kSub) {
    // ZeroMQ checks this per frame, before allocating it.
    socket.set(zmq::sockopt::maxmsgsize, options.max_message_size);
  } else {
    // A sending socket reads only subscriptions (PUB) or nothing (PUSH):
    // a peer that sends more is disconnected before anything is allocated.
    socket.set(zmq::sockopt::maxmsgsize, kMaxSubscriptionBytes);
  }
  if (kind == SocketKind::kPub) socket.set(zmq::sockopt::xpub_verboser, 1);
  if (kind == SocketKind::kPub && options.publish_no_drop) socket.set(zmq::sockopt::xpub_nodrop, 1);
  if (options.curve) configure_curve(socket, *options.curve);
  // Applied by ZeroMQ to tcp only; SocketMonitor does it for ipc.
  socket.set(zmq::sockopt::sndbuf, kSocketBufferBytes);
  socket.set(zmq::sockopt::rcvbuf, kSocketBufferBytes);
}

}  // namespace tensorcom::detail
