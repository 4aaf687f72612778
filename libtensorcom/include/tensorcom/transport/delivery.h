// Confirmed delivery for a PUSH sender. ZeroMQ's PUSH has no
// acknowledgement: a batch it took may still be lost with a connection (a
// receiver that went away, a peer dropped after a stall) or with the
// queue of a sender that exits before a late receiver comes. A sender that
// must know sends through a ConfirmedDelivery:
//
//   ConfirmedDelivery delivery(connection);
//   metadata.receipt = delivery.receipt();   // in every batch's metadata
//   metadata.sequence = seq;                 // unique in this run
//   delivery.send(seq, batch, how);          // kept until confirmed
//   ...
//   std::uint64_t lost = delivery.settle(timeout, stop);
//
// Receivers (every tensorcom Connection) confirm each batch whose metadata
// asks for it when recv() hands it over, on a small socket the sender binds
// beside its data (the receipt's address: "tcp:PORT" on the host the batch
// came from, or an ipc abstract socket). A batch still unconfirmed a while
// after a connection was lost is sent again; a receiver drops a copy of a
// batch it already took. What is guaranteed: docs/deploy.md, "Delivery".
// Thread safety: one thread at a time, as the Connection's.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "tensorcom/codec/metadata.h"
#include "tensorcom/transport/connection.h"
#include "tensorcom/transport/connection_controls.h"

namespace tensorcom {

struct DeliveryOptions {
  // Unconfirmed batches kept for re-sending: send() waits while this many,
  // or this many bytes of them, are kept.
  std::size_t window = 64;
  std::uint64_t window_bytes = std::uint64_t{1} << 30;
  // A batch sent before a connection was lost is sent again once it has
  // stayed unconfirmed for this long after the loss, or for twice the
  // longest recent time from send to receipt if that is longer (a batch
  // queued for a slow receiver is not lost).
  Milliseconds resend_after{1000};
  // Lines about waiting for receipts (every 10 s of waiting); may be empty.
  std::function<void(std::string_view)> log;
};

// What a ConfirmedDelivery has seen.
struct DeliveryCounts {
  std::uint64_t sent = 0;          // batches sent once (re-sends not counted)
  std::uint64_t confirmed = 0;     // of them, confirmed by a receiver
  std::uint64_t resent = 0;        // copies sent again after a lost connection
  std::uint64_t unconfirmed = 0;   // kept now, waiting for a receipt
  std::uint64_t bad_receipts = 0;  // receipts of another run, malformed, or for nothing kept
};

class ConfirmedDelivery {
 public:
  // Binds the receipt socket where the sender's receivers can reach it:
  // the data URLs' host for bound tcp URLs (all interfaces for connecting
  // ones, loopback when every tcp URL is loopback), an abstract socket for
  // ipc URLs; with CURVE, as a CURVE server with a key of its own, carried
  // in the receipt. Throws ArgumentError for a connection that is not PUSH
  // or has only inproc URLs (no receiver could reach a receipt socket),
  // TransportError if ZeroMQ refuses the socket.
  explicit ConfirmedDelivery(Connection& data, DeliveryOptions options = {});
  ~ConfirmedDelivery();
  ConfirmedDelivery(const ConfirmedDelivery&) = delete;
  ConfirmedDelivery& operator=(const ConfirmedDelivery&) = delete;

  // What each batch's metadata carries (with its sequence).
  [[nodiscard]] const DeliveryReceipt& receipt() const noexcept;

  // Waits while the window is full (reading receipts, re-sending what a
  // lost connection may have dropped), then sends `batch` as
  // send_until_stopped() does and keeps it until a receipt for `sequence`
  // comes. Returns false if a stop came first (nothing sent).
  bool send(std::uint64_t sequence, TensorList batch, const StoppableSend& how);

  // Waits until every batch sent is confirmed, re-sending as send() does,
  // for at most `timeout` or until stop_requested (may be empty) says so.
  // Returns: the batches still unconfirmed.
  std::uint64_t settle(Milliseconds timeout, const std::function<bool()>& stop_requested);

  // The sequences still unconfirmed, in order.
  [[nodiscard]] std::vector<std::uint64_t> unconfirmed() const;
  [[nodiscard]] DeliveryCounts counts() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorcom
