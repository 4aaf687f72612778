// Internal: keeps a sender's ipc connections open after ZeroMQ closes them,
// until each receiver has read what the kernel still holds for it.
//
// Why: ZeroMQ's linger ends once the queued batches are written to the
// kernel. A Unix-domain socket whose peer has closed reports a hang-up at
// once, and a receiver whose queue is full (its high-water mark reached)
// stops reading; on the hang-up it drops the connection without reading the
// bytes still in its socket, and the batches sent last are lost. (A TCP
// close is a half close, which the receiver reads through.) A duplicate of
// the descriptor delays the hang-up until the receiver has read everything,
// or the linger has run out.
#pragma once

#include <chrono>
#include <optional>
#include <unordered_map>

namespace tensorcom::detail {

class HeldConnections {
 public:
  using Clock = std::chrono::steady_clock;

  HeldConnections() = default;
  ~HeldConnections();
  HeldConnections(HeldConnections&& other) noexcept;
  HeldConnections& operator=(HeldConnections&& other) noexcept;
  HeldConnections(const HeldConnections&) = delete;
  HeldConnections& operator=(const HeldConnections&) = delete;

  // Holds the connection on descriptor fd (just made or accepted). A
  // descriptor that is not a socket any more (closed and reused before the
  // event was read) is left alone.
  void hold(int fd);
  // The connection on fd was lost: its duplicate closes.
  void release(int fd);
  // Waits until every held connection's receiver has read all bytes sent to
  // it (or has gone), or until deadline (none: no limit). Returns: whether
  // all were read.
  bool wait_until_read(std::optional<Clock::time_point> deadline) const;
  // Closes every duplicate: receivers see their connections end.
  void close_all() noexcept;

  [[nodiscard]] std::size_t size() const noexcept { return duplicates_.size(); }

 private:
  std::unordered_map<int, int> duplicates_;  // ZeroMQ's descriptor -> ours
};

// Bytes written to the connection on fd that its receiver has not read yet
// (0 when it has gone or fd is no Unix-domain stream socket).
std::size_t unread_bytes(int fd) noexcept;

}  // namespace tensorcom::detail
