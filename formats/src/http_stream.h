// The body of an http(s) URL, pulled a block at a time by the thread that
// reads the shard (libarchive's read callback), through libcurl's multi
// interface: no thread of its own, and bounded memory, since curl is paused
// while more than kHighWater bytes wait to be taken. Internal to formats/:
// the public headers stay free of curl.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorcom/formats/shard_reader.h"

namespace tensorcom::formats::detail {

// Why a transfer ended badly.
struct HttpFailure {
  std::string message;     // one line naming the redacted URL
  bool retryable = false;  // may succeed when fetched again (network, timeout, 408, 429, 5xx)
};

// Not thread-safe; one per transfer.
class HttpStream {
 public:
  using Clock = std::chrono::steady_clock;
  // At most this many bytes of the body wait in memory (plus one chunk of
  // curl's, 16 KiB): past it, curl is paused until the block is taken.
  static constexpr std::size_t kHighWater = std::size_t{1} << 20;

  // Starts fetching `url`. `cancelled` (may be empty) must outlive the
  // stream; it is polled every 100 ms while read() waits. Throws IoError
  // only if curl cannot be set up; network and HTTP failures come from read().
  HttpStream(const std::string& url, const HttpShardOptions& options, const std::function<bool()>& cancelled);
  ~HttpStream();
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;

  // The next bytes of the body, valid until the next call; empty at the end
  // of a complete body. Nothing when the transfer failed, stalled past the
  // stall timeout, came slower than the minimum rate, ran past the most
  // time a transfer may take, or was cancelled: failure() says why.
  [[nodiscard]] std::optional<std::span<const std::byte>> read();
  [[nodiscard]] const std::optional<HttpFailure>& failure() const noexcept { return failure_; }

 private:
  struct Handles;  // the curl easy and multi handles, cleaned up in order
  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* self);
  // Lets curl run once, then waits up to 100 ms for the socket.
  void drive();
  // Takes curl's verdict on a finished transfer.
  void take_result();
  void fail(std::string message, bool retryable);
  void resume();
  // Fails the transfer if it has come too slowly or for too long.
  void check_pace(Clock::time_point now);

  std::string url_;  // redacted, for messages
  HttpShardOptions options_;
  const std::function<bool()>& cancelled_;
  std::unique_ptr<Handles> handles_;
  std::vector<std::byte> filling_;  // what curl delivered since the last read()
  std::vector<std::byte> handed_;   // the block the caller holds
  bool paused_ = false;             // curl holds a chunk we refused
  Clock::time_point started_ = Clock::now();
  Clock::duration waited_{};        // waiting for the body in this rate window
  std::uint64_t window_bytes_ = 0;  // bytes that came in this rate window
  bool finished_ = false;           // the body is complete
  std::optional<HttpFailure> failure_;
};

}  // namespace tensorcom::formats::detail
