#include "zap_handler.h"

#include <zmq_addon.hpp>

#include <chrono>
#include <cstring>
#include <span>

#include "tensorcom/codec/error.h"

namespace tensorcom::detail {
namespace {

// The endpoint libzmq sends authentication requests to (RFC 27).
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
// How often the handler's thread looks at its stop flag.
constexpr std::chrono::milliseconds kStopPoll{100};

std::string text_of(const zmq::message_t& frame) { return frame.to_string(); }

std::string z85_of(const std::uint8_t* key) {
  char text[41];
  if (zmq_z85_encode(text, key, 32) == nullptr) return "?";
  return text;
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& context, const std::optional<std::vector<std::string>>& allowed_z85_keys,
                       std::shared_ptr<AddressBans> bans)
    : socket_(context, zmq::socket_type::router), bans_(std::move(bans)) {
  if (allowed_z85_keys) {
    allowed_.emplace();
    for (const std::string& text : *allowed_z85_keys) {
      Key key{};
      if (text.size() != 40 || zmq_z85_decode(key.data(), text.c_str()) == nullptr) {
        throw ArgumentError("allowed client key '" + text + "' is not a 40-character Z85 key");
      }
      allowed_->insert(key);
    }
  }
  socket_.set(zmq::sockopt::linger, 0);
  try {
    socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw TransportError(std::string("cannot start CURVE authentication: ") + e.what(), e.num());
  }
  thread_ = std::thread([this] { run(); });
}

ZapHandler::~ZapHandler() {
  stop_ = true;
  thread_.join();
}

std::vector<std::string> ZapHandler::take_lines() {
  std::lock_guard lock(lines_mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (minute_lines_ > kLinesPerMinute && now - minute_start_ >= std::chrono::minutes(1)) {
    lines_.push_back("refused " + std::to_string(minute_lines_ - kLinesPerMinute) +
                     " more peers in a minute, not named (Connection::refused_peers() counts them all)");
    minute_lines_ = 0;
  }
  std::vector<std::string> out(lines_.begin(), lines_.end());
  lines_.clear();
  return out;
}

void ZapHandler::run() {
  while (!stop_) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, kStopPoll) <= 0) continue;
      std::vector<zmq::message_t> request;
      if (!zmq::recv_multipart(socket_, std::back_inserter(request))) continue;
      answer(request);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      // EINTR from a signal: look at the stop flag and go on.
    }
  }
}

// Request, after the envelope (the pipe's routing id, an empty frame):
// version, request id, domain, address, routing id, mechanism, credentials
// (CURVE: the client's 32-byte public key). Reply, after the same envelope:
// version, request id, status code, status text, user id, metadata.
void ZapHandler::answer(std::vector<zmq::message_t>& frames) {
  if (frames.size() < 2 || frames[1].size() != 0) return;  // no envelope: nobody to answer
  const std::span<zmq::message_t> request(frames.begin() + 2, frames.end());
  const bool well_formed = request.size() >= 6 && text_of(request[0]) == "1.0";
  const bool curve = well_formed && text_of(request[5]) == "CURVE" && request.size() >= 7 && request[6].size() == 32;
  const std::string address = well_formed ? text_of(request[3]) : "?";
  // A banned flooder gets no answer: its handshake never ends, so nothing
  // of it is read, and PeerGuard drops its connection as it comes. A
  // refusal would be final: a ZeroMQ peer refused in its handshake never
  // reconnects, and an honest peer behind the same address would be locked
  // out for good; dropped, it reconnects and is served once the ban ends.
  if (well_formed && bans_ && bans_->banned(address, AddressBans::Clock::now())) return;
  Key key{};
  if (curve) std::memcpy(key.data(), request[6].data(), key.size());
  const bool listed = !allowed_ || (curve && allowed_->count(key) > 0);
  const bool allowed = well_formed && listed;
  if (!allowed) {
    ++refused_;
    note_refusal(curve ? "refused a peer at " + address + ": its CURVE key " + z85_of(key.data()) + " is not allowed"
                       : "refused a peer at " + address + ": not a CURVE client");
  }
  std::array<zmq::message_t, 8> reply{
      std::move(frames[0]),
      zmq::message_t(),
      zmq::message_t(std::string_view("1.0")),
      zmq::message_t(request.size() > 1 ? request[1].data() : nullptr, request.size() > 1 ? request[1].size() : 0),
      zmq::message_t(std::string_view(allowed ? "200" : "400")),
      zmq::message_t(std::string_view(allowed ? "OK" : "key not allowed")),
      zmq::message_t(allowed && curve ? z85_of(key.data()) : std::string()),
      zmq::message_t()};
  zmq::send_multipart(socket_, reply);
}

void ZapHandler::note_refusal(std::string line) {
  std::lock_guard lock(lines_mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (now - minute_start_ >= std::chrono::minutes(1) && minute_lines_ <= kLinesPerMinute) {
    minute_start_ = now;
    minute_lines_ = 0;
  }
  if (++minute_lines_ <= kLinesPerMinute) lines_.push_back(std::move(line));
}

}  // namespace tensorcom::detail
