// libFuzzer target: the receive path of a Connection, through ZeroMQ as a
// peer would reach it. That path is private to libtensorcom/src/connection.cc
// (frames received, the whole-message size check, decode_message with the
// connection's DecodeLimits, malformed messages counted by kind), so it is
// driven through the public API: a raw PUSH socket sends the input as one
// message to a PULL Connection with small limits.
//
// The input is cut into frames: each is a 2-byte little-endian length (taken
// modulo 1025: ZeroMQ itself drops a peer that sends a frame over
// max_message_size, which is not the path under test) and that many bytes,
// the last frame whatever is left. After it goes a valid sentinel message.
// The fuzz message must come out as a batch, or be counted as malformed
// exactly once; either way the sentinel must come through after it.
#include <zmq.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "tensorcom/transport/connection.h"

using namespace tensorcom;

namespace {

constexpr std::size_t kMaxFrame = 1024;
constexpr std::int64_t kMaxMessage = 2048;  // frames of up to 1024 bytes add up past it
constexpr std::size_t kMaxFrames = 64;

struct Link {
  Connection pull;
  zmq::context_t context;
  zmq::socket_t push;

  Link() : pull({"zpull://127.0.0.1:0"}, receive_options()), push(context, zmq::socket_type::push) {
    push.set(zmq::sockopt::linger, 0);
    push.connect(pull.bound_addresses().at(0));
  }

  static ConnectionOptions receive_options() {
    ConnectionOptions options;
    options.max_message_size = kMaxMessage;
    options.limits.max_ndim = 8;
    options.limits.max_tensors = 8;
    options.reuse_receive_memory = false;  // malloc options stay the sanitizer's
    options.linger = Milliseconds(0);
    options.log = nullptr;  // counted, not printed
    return options;
  }
};

Link& link() {
  static Link* link = new Link();  // never destroyed: no ZeroMQ shutdown at exit
  return *link;
}

std::vector<std::string> frames_of(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> frames;
  std::size_t at = 0;
  while (at < size && frames.size() < kMaxFrames) {
    std::size_t length = size - at;
    if (size - at >= 2) {
      length = (data[at] | (data[at + 1] << 8)) % (kMaxFrame + 1);
      at += 2;
      length = std::min(length, size - at);
    }
    if (frames.size() + 1 == kMaxFrames) length = std::min(size - at, kMaxFrame);
    frames.emplace_back(reinterpret_cast<const char*>(data + at), length);
    at += length;
  }
  if (frames.empty()) frames.emplace_back();
  return frames;
}

// recv(), again when a signal interrupted the wait: libFuzzer's -timeout
// is a SIGALRM timer, and a Connection reports EINTR (connection.h).
std::optional<TensorList> receive(Connection& pull) {
  for (;;) {
    try {
      return pull.recv(Milliseconds(10000));
    } catch (const TransportError& e) {
      if (e.code() != EINTR) throw;
    }
  }
}

bool is_sentinel(const TensorList& batch, std::uint64_t number) {
  return batch.size() == 1 && batch[0].info() == "sentinel" && batch[0].nbytes() == sizeof number &&
         std::memcmp(batch[0].data(), &number, sizeof number) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static std::uint64_t sentinel_number = 0x5e471e1;
  Link& l = link();
  const std::uint64_t malformed_before = l.pull.malformed().total();

  std::vector<std::string> frames = frames_of(data, size);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const bool last = i + 1 == frames.size();
    (void)l.push.send(zmq::buffer(frames[i]), last ? zmq::send_flags::none : zmq::send_flags::sndmore);
  }
  ++sentinel_number;
  Tensor sentinel = Tensor::allocate(DType::kUInt8, {8}, "sentinel");
  std::memcpy(sentinel.data(), &sentinel_number, sizeof sentinel_number);
  zmq::message_t header_frame(header_size(sentinel));
  write_header(sentinel, {static_cast<std::byte*>(header_frame.data()), header_frame.size()});
  (void)l.push.send(header_frame, zmq::send_flags::sndmore);
  (void)l.push.send(zmq::buffer(sentinel.data(), sentinel.nbytes()), zmq::send_flags::none);

  auto first = receive(l.pull);
  if (!first) __builtin_trap();  // lost: neither a batch nor counted
  const std::uint64_t counted = l.pull.malformed().total() - malformed_before;
  if (is_sentinel(*first, sentinel_number)) {
    if (counted != 1) __builtin_trap();  // the fuzz message vanished uncounted (or counted twice)
    return 0;
  }
  if (counted != 0) __builtin_trap();
  std::size_t sum = 0;
  for (const Tensor& t : *first) {
    for (std::byte b : t.bytes()) sum += static_cast<std::size_t>(b);
  }
  auto second = receive(l.pull);
  if (!second || !is_sentinel(*second, sentinel_number)) __builtin_trap();
  return static_cast<int>(sum & 0);
}
