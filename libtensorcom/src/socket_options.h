// Internal: ZeroMQ socket set-up from ConnectionOptions.
#pragma once

#include <zmq.hpp>

#include "tensorcom/transport/connection.h"

namespace tensorcom::detail {

// Socket buffer size for batch traffic: batches are megabytes, the kernel's
// default a few hundred KiB.
inline constexpr int kSocketBufferBytes = 4 << 20;

// The largest message a sending socket accepts from a peer: a subscription
// (one byte and the topic). Topics are short; a megabyte one is an attack
// on the subscription table's memory.
inline constexpr std::int64_t kMaxSubscriptionBytes = 4096;

// How long a connecting peer has to finish the ZMTP (and CURVE) handshake.
inline constexpr int kHandshakeMs = 10000;

[[nodiscard]] zmq::socket_type zmq_type(SocketKind kind) noexcept;
// Makes the socket a CURVE server or client with curve's keys.
// Throws ArgumentError without a secret key, zmq::error_t for a bad key.
void configure_curve(zmq::socket_t& socket, const CurveSecurity& curve);
// Applies every option that must be set before bind/connect.
void configure_socket(zmq::socket_t& socket, SocketKind kind, const ConnectionOptions& options);

}  // namespace tensorcom::detail
