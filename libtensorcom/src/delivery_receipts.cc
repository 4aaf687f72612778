#include "delivery_receipts.h"

#include <algorithm>

#include "receipt_wire.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/transport/curve.h"

namespace tensorcom::detail {

namespace {

// Receipts are tiny; what is queued at close is worth a moment, not more.
constexpr int kReceiptLingerMs = 200;

std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

}  // namespace

DeliveryReceipts::DeliveryReceipts(zmq::context_t& context, Policy policy, std::function<void(std::string_view)> log)
    : context_(context), policy_(policy), log_(std::move(log)) {}

bool DeliveryReceipts::take(std::span<const Tensor> batch, const std::function<std::string()>& peer_address) {
  if (batch.empty() || batch.back().info() != kMetadataInfo) return true;
  std::optional<BatchMetadata> metadata;
  try {
    metadata = find_metadata(batch);
  } catch (const FormatError&) {
    return true;  // the application reads (and refuses) it as it would any metadata
  }
  if (!metadata) return true;
  watch_stream(*metadata);
  if (refusal_) throw TransportError(*refusal_);
  if (!policy_.confirm || !metadata->receipt) return true;
  const bool first = first_time(metadata->receipt->run, metadata->sequence);
  // A copy is confirmed too: its sender stops sending it again.
  confirm(*metadata->receipt, metadata->sequence, peer_address());
  if (!first) ++duplicates_;
  return first;
}

void DeliveryReceipts::close() { sockets_.clear(); }

bool DeliveryReceipts::first_time(std::uint64_t run, std::uint64_t sequence) {
  auto it = runs_.find(run);
  if (it == runs_.end()) {
    if (runs_.size() >= kMaxRuns) {
      runs_.erase(std::min_element(runs_.begin(), runs_.end(), [](const auto& a, const auto& b) {
        return a.second.last_seen < b.second.last_seen;
      }));
    }
    it = runs_.emplace(run, Run{}).first;
  }
  Run& r = it->second;
  r.last_seen = Clock::now();
  if (!r.taken.insert(sequence).second) return false;
  if (r.taken.size() > kRememberedPerRun) r.taken.erase(r.taken.begin());
  return true;
}

void DeliveryReceipts::confirm(const DeliveryReceipt& receipt, std::uint64_t sequence,
                               const std::string& peer_address) {
  zmq::socket_t* socket = receipt_socket(receipt, peer_address);
  if (!socket) return;
  const std::uint64_t sequences[] = {sequence};
  const std::vector<std::byte> bytes = encode_receipt(receipt.run, sequences);
  try {
    // A full queue (a sender gone for long) loses a receipt: the sender
    // then sends the batch again, and this receiver drops the copy.
    (void)socket->send(zmq::buffer(bytes.data(), bytes.size()), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // As a lost receipt.
  }
}

zmq::socket_t* DeliveryReceipts::receipt_socket(const DeliveryReceipt& receipt, std::string_view peer_address) {
  std::optional<std::string> endpoint;
  // Over tcp the sender's tcp receipt address; else (ipc) its ipc one.
  for (const std::string& address : receipt.to) {
    if (address.starts_with(peer_address.empty() ? "ipc:" : "tcp:")) endpoint = receipt_endpoint(address, peer_address);
    if (endpoint) break;
  }
  if (!endpoint) {
    say_once(said_unreachable_, "tensorcom: a sender asks for receipts at an address this receiver cannot use (" +
                                    printable(receipt.to.empty() ? "none" : receipt.to.front()) +
                                    "): its batches are taken unconfirmed");
    return nullptr;
  }
  const std::string key = *endpoint + " " + receipt.key;
  if (auto it = sockets_.find(key); it != sockets_.end()) return &it->second;
  if (sockets_.size() >= kMaxSenders) {
    say_once(said_too_many_senders_, "tensorcom: receipts go to at most " + std::to_string(kMaxSenders) +
                                         " senders: batches of further ones are taken unconfirmed");
    return nullptr;
  }
  try {
    zmq::socket_t socket(context_, zmq::socket_type::push);
    socket.set(zmq::sockopt::linger, kReceiptLingerMs);
    socket.set(zmq::sockopt::sndhwm, 10000);
    socket.set(zmq::sockopt::reconnect_ivl, 100);
    socket.set(zmq::sockopt::ipv6, 1);
    if (!receipt.key.empty()) {
      if (!client_keys_) {
        const CurveKeyPair keys = generate_curve_keypair();
        client_keys_.emplace(keys.public_key, keys.secret_key);
      }
      socket.set(zmq::sockopt::curve_serverkey, receipt.key);
      socket.set(zmq::sockopt::curve_publickey, client_keys_->first);
      socket.set(zmq::sockopt::curve_secretkey, client_keys_->second);
    }
    socket.connect(*endpoint);
    return &sockets_.emplace(key, std::move(socket)).first->second;
  } catch (const std::exception& e) {
    say_once(said_unreachable_, "tensorcom: cannot send receipts to " + printable(*endpoint) + " (" + e.what() +
                                    "): batches are taken unconfirmed");
    return nullptr;
  }
}

void DeliveryReceipts::watch_stream(const BatchMetadata& metadata) {
  if (!metadata.place) return;
  const StreamPlace& place = *metadata.place;
  const std::string key = place.stream + '\n' + place.fingerprint;
  const std::string id =
      metadata.server + " (run " + std::to_string(metadata.receipt ? metadata.receipt->run : 0) + ")";
  auto it = streams_.find(key);
  if (it == streams_.end()) {
    if (streams_.size() >= kMaxStreams) return;
    it = streams_.emplace(key, std::vector<StreamSource>{}).first;
  }
  std::vector<StreamSource>& sources = it->second;
  const auto now = Clock::now();
  auto self = std::find_if(sources.begin(), sources.end(), [&](const StreamSource& s) { return s.id == id; });
  if (self == sources.end()) {
    constexpr std::size_t kMostSources = 8;
    if (sources.size() >= kMostSources) sources.erase(sources.begin());
    sources.push_back({id, now, now});
    self = sources.end() - 1;
  }
  self->last_seen = now;
  // Two servers overlap when one sent after the other began: a server that
  // replaced another (a restart, a resume) never does.
  for (const StreamSource& other : sources) {
    if (other.id == self->id || other.last_seen < self->first_seen) continue;
    if (!duplicate_streams_said_.insert(key).second) return;
    const std::string what = "the same stream '" + printable(place.stream) + "' (fingerprint " +
                             printable(place.fingerprint) + ") comes from two servers, " + printable(other.id) +
                             " and " + printable(self->id) +
                             ": they make the same batches (give each its own --seed, or --rank and --world)";
    if (policy_.refuse_duplicates) {
      refusal_ = "refusing batches: " + what;
    } else {
      log_("tensorcom: " + what);
    }
    return;
  }
}

void DeliveryReceipts::say_once(bool& said, const std::string& line) {
  if (said) return;
  said = true;
  log_(line);
}

}  // namespace tensorcom::detail
