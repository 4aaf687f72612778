// Internal: the receipts of confirmed delivery (tensorcom/transport/delivery.h)
// on the wire, and where a receiver sends them. A receipt is one ZeroMQ
// message of little-endian 64-bit words: the sending run, then one or more
// batch sequences it confirms. Both ends check every bound here: the bytes
// come from a peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tensorcom::detail {

// The most sequences one receipt may name.
inline constexpr std::size_t kMaxReceiptSequences = 512;
inline constexpr std::size_t kMaxReceiptBytes = 8 * (1 + kMaxReceiptSequences);
// Names of receipt sockets on ipc: Linux abstract sockets with this prefix
// and 16 hex digits; a receiver connects to no other ipc name.
inline constexpr std::string_view kReceiptIpcPrefix = "@tensorcom-receipt-";

[[nodiscard]] std::vector<std::byte> encode_receipt(std::uint64_t run, std::span<const std::uint64_t> sequences);

struct Receipt {
  std::uint64_t run = 0;
  std::vector<std::uint64_t> sequences;
};
// Nothing for bytes that are no receipt (a size that is not 16 .. the most,
// in 8-byte words).
[[nodiscard]] std::optional<Receipt> decode_receipt(std::span<const std::byte> bytes);

// The ZeroMQ endpoint a receiver sends receipts to, for one of a batch's
// receipt addresses, given the address of the peer the batch came from
// (ZeroMQ's "Peer-Address": empty when the transport has none). Nothing for
// an address this receiver cannot or must not use: "tcp:PORT" needs a peer
// address (the host is never taken from the metadata, so a sender cannot
// point a receiver at another machine), "ipc:" only names kReceiptIpcPrefix
// sockets.
[[nodiscard]] std::optional<std::string> receipt_endpoint(std::string_view address, std::string_view peer_address);

}  // namespace tensorcom::detail
