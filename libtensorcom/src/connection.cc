#include "tensorcom/transport/connection.h"

#include <arpa/inet.h>
#include <zmq.hpp>

#include <cstring>
#include <iostream>
#include <set>

#include "poll_signal.h"
#include "receive_memory.h"

#include "delivery_receipts.h"
#include "socket_monitor.h"
#include "socket_options.h"
#include "subscription_ledger.h"
#include "zap_handler.h"
#include "tensorcom/transport/brace.h"
#include "tensorcom/transport/connection_controls.h"
#include "tensorcom/transport/url.h"

namespace tensorcom {

void log_to_stderr(std::string_view line) { std::cerr << line << '\n'; }

std::uint64_t MalformedCounts::total() const noexcept {
  std::uint64_t sum = 0;
  for (const auto& [kind, count] : by_kind) sum += count;
  return sum;
}

std::map<std::string, std::uint64_t> MalformedCounts::by_name() const {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [kind, count] : by_kind) out.emplace(format_error_kind_name(kind), count);
  return out;
}

std::uint64_t batch_size(std::span<const Tensor> batch) noexcept {
  if (batch.empty()) return 0;
  if (const auto images = compressed_image_count(batch)) return *images;
  return batch[0].ndim() == 0 ? 1 : static_cast<std::uint64_t>(batch[0].shape()[0]);
}

std::uint64_t batch_bytes(std::span<const Tensor> batch) noexcept {
  std::uint64_t sum = 0;
  for (const Tensor& t : batch) sum += t.nbytes();
  return sum;
}

namespace {

// The IP address a message came from; empty when its transport has none
// (ZeroMQ gives ipc peers' credentials, "localhost:UID:GID:PID", instead).
std::string peer_address(zmq::message_t& frame) {
  const char* address = nullptr;
  try {
    address = frame.gets("Peer-Address");
  } catch (const zmq::error_t&) {
    return "";
  }
  unsigned char ip[sizeof(in6_addr)];
  if (!address || (::inet_pton(AF_INET, address, ip) != 1 && ::inet_pton(AF_INET6, address, ip) != 1)) return "";
  return address;
}

[[noreturn]] void throw_transport(const std::string& what, const zmq::error_t& e) {
  throw TransportError(what + ": " + e.what(), e.num());
}

// ZeroMQ's free callback for zero-copy frames: drops the tensor's owner.
void release_owner(void* /*data*/, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }

// A frame that ZeroMQ reads straight from the tensor's memory.
zmq::message_t data_frame(const Tensor& tensor) {
  if (tensor.nbytes() == 0) return zmq::message_t();
  if (!tensor.owner()) {
    // Nothing keeps the memory alive after send() returns: copy it.
    return zmq::message_t(tensor.data(), tensor.nbytes());
  }
  auto* hint = new std::shared_ptr<const void>(tensor.owner());
  return zmq::message_t(const_cast<std::byte*>(tensor.data()), tensor.nbytes(), release_owner, hint);
}

zmq::message_t header_frame(const Tensor& tensor) {
  zmq::message_t frame(header_size(tensor));
  write_header(tensor, {static_cast<std::byte*>(frame.data()), frame.size()});
  return frame;
}

}  // namespace

class Connection::Impl {
 public:
  Impl(std::span<const std::string> urls, ConnectionOptions options)
      : options_(std::move(options)),
        endpoints_(parse_urls(urls, options_.expand_braces)),
        stats_(options_.stats_horizon),
        memory_(options_.reuse_receive_memory, receives()) {
    const SocketKind kind = endpoints_.front().kind;
    try {
      if (options_.curve && options_.curve->server_public_key.empty() && options_.curve->allowed_clients) {
        zap_ = std::make_unique<detail::ZapHandler>(context_, options_.curve->allowed_clients, bans_);
      }
      socket_ = zmq::socket_t(context_, detail::zmq_type(kind));
      detail::configure_socket(socket_, kind, options_);
      if (kind == SocketKind::kSub) socket_.set(zmq::sockopt::subscribe, options_.topic.value_or(endpoints_[0].topic));
    } catch (const zmq::error_t& e) {
      throw_transport("cannot create a " + std::string(socket_kind_name(kind)) + " socket", e);
    }
    if (receives() && (options_.confirm_delivery || options_.refuse_duplicate_streams)) {
      receipts_ = std::make_unique<detail::DeliveryReceipts>(
          context_, detail::DeliveryReceipts::Policy{options_.confirm_delivery, options_.refuse_duplicate_streams},
          [this](std::string_view line) { log(line); });
    }
    // Senders watch for peers (see close()); ipc connections need tuning.
    if (!receives() || uses_ipc()) start_monitor();
    for (const Endpoint& endpoint : endpoints_) attach(endpoint);
  }

  ~Impl() { close(); }

  void connect(std::span<const std::string> urls) {
    require_open("connect");
    std::vector<std::string> all;
    for (const Endpoint& endpoint : endpoints_) all.push_back(endpoint.url);
    const std::size_t known = all.size();
    if (options_.expand_braces) {
      for (std::string& url : brace_expand_all(urls)) all.push_back(std::move(url));
    } else {
      all.insert(all.end(), urls.begin(), urls.end());
    }
    // Checked together: every URL must fit this socket.
    std::vector<Endpoint> endpoints = parse_urls(all, false);
    for (std::size_t i = known; i < endpoints.size(); ++i) {
      if (endpoints[i].address.starts_with("ipc://")) start_monitor();
      attach(endpoints[i]);
      endpoints_.push_back(std::move(endpoints[i]));
    }
  }

  // Receivers have nothing to deliver; senders that sent nothing, or never
  // saw a peer (a connect in progress gets kPeerGrace to complete), could
  // deliver nothing: they close at once (see connection.h).
  void close() {
    if (closed_) return;
    closed_ = true;
    if (monitor_ && !receives() && stats_.batches() > 0) {
      (void)monitor_->wait_for_connection(std::min(options_.linger, kPeerGrace));
    }
    const std::uint64_t peers = stats_.batches() == 0 || !monitor_ ? 0 : monitor_->stop();
    const bool lingers = !receives() && peers > 0;
    const std::optional<std::chrono::steady_clock::time_point> linger_ends =
        options_.linger.count() < 0 ? std::nullopt : std::optional(std::chrono::steady_clock::now() + options_.linger);
    detail::HeldConnections held = lingers ? monitor_->take_held() : detail::HeldConnections{};
    dropped_peers_ = dropped_peers();
    monitor_.reset();  // its socket must close before the context can
    poll_signal_.reset();
    try {
      if (!lingers) socket_.set(zmq::sockopt::linger, 0);
    } catch (const zmq::error_t&) {
      // The configured linger stays: slower to exit, not wrong.
    }
    zap_.reset();
    if (receipts_) receipts_->close();
    receipts_.reset();
    socket_.close();
    context_.close();  // the queued batches are in the kernel, or the linger is over
    (void)held.wait_until_read(linger_ends);
    memory_.close();
  }

  bool closed() const noexcept { return closed_; }

  bool receives() const noexcept {
    SocketKind kind = endpoints_.front().kind;
    return kind == SocketKind::kPull || kind == SocketKind::kSub;
  }

  std::optional<TensorList> recv(std::optional<Milliseconds> timeout) {
    require(receives(), "recv");
    require_open("recv");
    log_refusals();
    const auto deadline =
        timeout ? std::chrono::steady_clock::now() + *timeout : std::chrono::steady_clock::time_point::max();
    for (;;) {
      if (!wait_readable_counting_blocked(deadline)) return std::nullopt;
      auto frames = receive_frames();
      if (!frames) continue;
      zmq::message_t& first = frames->front();  // alive as long as the batch's views
      if (auto batch = decode(std::move(frames))) {
        // A copy of a batch taken before (its sender re-sent it) is dropped.
        if (receipts_ && !receipts_->take(*batch, [&first] { return peer_address(first); })) continue;
        return batch;
      }
    }
  }

  bool send(std::span<const Tensor> batch, Framing framing) {
    require(!receives(), "send");
    require_open("send");
    log_refusals();
    if (publishes() && subscribers() == 0) {
      if (!options_.await_subscriber) {
        ++dropped_without_subscriber_;
        return false;
      }
      wait_for_subscriber(std::nullopt);
    }
    return deliver(batch, framing, zmq::send_flags::none);
  }

  Connection::Sent try_send(std::span<const Tensor> batch, Framing framing) {
    require(!receives(), "send");
    require_open("send");
    log_refusals();
    if (publishes() && subscribers() == 0) {
      if (options_.await_subscriber) return Connection::Sent::kWouldBlock;
      ++dropped_without_subscriber_;
      return Connection::Sent::kNoSubscriber;
    }
    return deliver(batch, framing, zmq::send_flags::dontwait) ? Connection::Sent::kYes : Connection::Sent::kWouldBlock;
  }

  // Hands the batch to ZeroMQ; `first` is the first frame's flags (dontwait:
  // false, nothing sent, if it cannot leave at once). The frames after it
  // never block: ZeroMQ takes a message's later frames on the pipe that
  // took its first.
  bool deliver(std::span<const Tensor> batch, Framing framing, zmq::send_flags first) {
    fit_send_queue_to(batch_bytes(batch));
    memory_.before_send(batch, framing);
    try {
      const bool sent = framing == Framing::kSingleBuffer ? send_single(batch, first) : send_multipart(batch, first);
      if (!sent) return false;
    } catch (const zmq::error_t& e) {
      throw_transport("send to " + describe() + " failed", e);
    }
    stats_.add(batch_size(batch), batch_bytes(batch));
    return true;
  }

  // PUB sockets are XPUB underneath: the subscriptions come as messages.
  // Past the ledger's bound the busiest peer goes, its subscriptions with it.
  std::uint64_t subscribers() {
    if (!publishes() || closed_) return subscriptions_.count();
    zmq::message_t message;
    try {
      while (socket_.recv(message, zmq::recv_flags::dontwait)) {
        subscriptions_.take({static_cast<const std::byte*>(message.data()), message.size()});
      }
    } catch (const zmq::error_t& e) {
      throw_transport("reading subscriptions on " + describe() + " failed", e);
    }
    if (monitor_ && subscriptions_.drop_due(std::chrono::steady_clock::now())) (void)monitor_->drop_busiest_peer();
    return subscriptions_.count();
  }

  std::uint64_t subscribing_peers() {
    const std::uint64_t subscriptions = subscribers();
    if (!publishes() || !monitor_) return subscriptions;
    return std::min(subscriptions, monitor_->peers());
  }

  DroppedPeers dropped_peers() const {
    if (!monitor_) return dropped_peers_;
    using detail::PeerGuard;
    return {dropped_peers_.unfinished + monitor_->dropped(PeerGuard::Drop::kUnfinished),
            dropped_peers_.flooding + monitor_->dropped(PeerGuard::Drop::kFlooding),
            dropped_peers_.over_limit + monitor_->dropped(PeerGuard::Drop::kOverLimit), bans_->refused()};
  }

  // A subscription arrives as a message: wait for one.
  bool wait_for_subscriber(std::optional<Milliseconds> timeout) {
    if (!publishes()) return true;
    require_open("waiting for a subscriber");
    const auto deadline =
        timeout ? std::chrono::steady_clock::now() + *timeout : std::chrono::steady_clock::time_point::max();
    while (subscribers() == 0) {
      if (!wait_readable(deadline)) return false;
    }
    return true;
  }

  bool wait_writable(Milliseconds timeout) {
    require_open("waiting to send");
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLOUT, 0};
    try {
      zmq::poll(&item, 1, timeout);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) return false;
      throw_transport("waiting to send on " + describe() + " failed", e);
    }
    return (item.revents & ZMQ_POLLOUT) != 0;
  }

  std::uint64_t refused_peers() const noexcept { return zap_ ? zap_->refused() : 0; }

  ConnectionCount connections() const noexcept {
    if (!monitor_) return {};
    return {monitor_->open(), monitor_->lost()};
  }

  void set_high_water_marks(int send, int receive) {
    require_open("setting high-water marks");
    options_.send_high_water_mark = send;
    options_.receive_high_water_mark = receive;
    apply_high_water_marks();
  }

  void shorten_linger_for_stop() {
    if (receives()) return;
    set_linger(publishes() ? Milliseconds(0) : std::min(options_.linger, kStopLinger));
  }

  void set_linger(Milliseconds linger) {
    require_open("setting linger");
    options_.linger = linger;
    set_option(zmq::sockopt::linger, static_cast<int>(linger.count()), "linger");
  }

  // See PollSignal: made on first use, with its watcher thread.
  int poll_descriptor() {
    const bool waiting = message_waiting();
    if (!poll_signal_) {
      try {
        poll_signal_ = std::make_unique<detail::PollSignal>(socket_.get(zmq::sockopt::fd));
      } catch (const zmq::error_t& e) {
        throw_transport("polling " + describe() + " failed", e);
      }
    }
    poll_signal_->settle(waiting);
    return poll_signal_->fd();
  }

  bool message_waiting() {
    require_open("polling");
    try {
      return (socket_.get(zmq::sockopt::events) & ZMQ_POLLIN) != 0;
    } catch (const zmq::error_t& e) {
      throw_transport("polling " + describe() + " failed", e);
    }
  }

  void log_refusals() {
    if (!zap_) return;
    for (const std::string& line : zap_->take_lines()) log("tensorcom: " + describe() + ": " + line);
  }

  // Hands a line to the user's log hook, if any.
  void log(std::string_view line) const {
    if (options_.log) options_.log(line);
  }

  std::string describe() const {
    std::string out;
    for (const Endpoint& endpoint : endpoints_) out += (out.empty() ? "" : ", ") + endpoint.url;
    return out;
  }

  ConnectionOptions options_;
  std::uint64_t dropped_without_subscriber_ = 0;
  std::vector<Endpoint> endpoints_;
  std::vector<std::string> bound_;
  Statistics stats_;
  MalformedCounts malformed_;
  detail::ReceiveMemory memory_;

 private:
  void attach(const Endpoint& endpoint) {
    try {
      // ZeroMQ takes bracketed IPv6 hosts only from a socket told so
      // (without it: "No such device"); it applies to later binds and connects.
      if (endpoint.address.find('[') != std::string::npos) socket_.set(zmq::sockopt::ipv6, 1);
      if (endpoint.bind) {
        if (!receives()) refuse_banned_addresses();
        socket_.bind(endpoint.address);
        bound_.push_back(socket_.get(zmq::sockopt::last_endpoint));
      } else {
        socket_.connect(endpoint.address);
      }
    } catch (const zmq::error_t& e) {
      // ZeroMQ reports a host it cannot resolve, or an interface it does not
      // know, as ENODEV.
      const std::string why = e.num() == ENODEV ? ": no such host or interface" : "";
      throw_transport(std::string(endpoint.bind ? "cannot bind " : "cannot connect ") + endpoint.url + " (" +
                          endpoint.address + ")" + why,
                      e);
    }
  }

  bool publishes() const noexcept { return endpoints_.front().kind == SocketKind::kPub; }

  // A sender's peers that PeerGuard dropped for flooding reconnect at once;
  // their addresses are refused inside the handshake for a while
  // (address_bans.h). A ZAP domain makes libzmq ask the ZAP handler during
  // NULL handshakes too.
  void refuse_banned_addresses() {
    if (!zap_) zap_ = std::make_unique<detail::ZapHandler>(context_, std::nullopt, bans_);
    socket_.set(zmq::sockopt::zap_domain, "tensorcom");
  }

  template <class Option, class Value>
  void set_option(Option option, Value value, const char* name) {
    try {
      socket_.set(option, value);
    } catch (const zmq::error_t& e) {
      throw_transport(std::string("cannot set ") + name + " on " + describe(), e);
    }
  }

  // Keeps the send queue within options_.queue_bytes for batches as large
  // as the largest sent so far (see ConnectionOptions). The mark is only
  // ever lowered: raising it under a full queue can leave ZeroMQ's writer
  // waiting for a wake-up that never comes.
  void fit_send_queue_to(std::uint64_t batch_bytes) {
    if (options_.queue_bytes <= 0 || batch_bytes <= 2 * fitted_bytes_) return;
    const int before = fitted_send_high_water_mark();
    fitted_bytes_ = batch_bytes;
    if (fitted_send_high_water_mark() != before) apply_high_water_marks();
  }

  // The send high-water mark lowered to fit queue_bytes (0, ZeroMQ's "no
  // limit", stays).
  int fitted_send_high_water_mark() const noexcept {
    const int count = options_.send_high_water_mark;
    if (options_.queue_bytes <= 0 || fitted_bytes_ == 0 || count <= 0) return count;
    const std::uint64_t fit =
        std::max<std::uint64_t>(2, static_cast<std::uint64_t>(options_.queue_bytes) / fitted_bytes_);
    return static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(count), fit));
  }

  // ZeroMQ applies these to the pipes of peers already connected too.
  void apply_high_water_marks() {
    set_option(zmq::sockopt::sndhwm, fitted_send_high_water_mark(), "the send high-water mark");
    set_option(zmq::sockopt::rcvhwm, options_.receive_high_water_mark, "the receive high-water mark");
  }

  void start_monitor() {
    if (monitor_) return;
    using detail::PeerGuard;
    const std::uint64_t handshake_bytes =
        receives() ? 0 : (options_.curve ? PeerGuard::kCurveHandshakeBytes : PeerGuard::kNullHandshakeBytes);
    monitor_ = std::make_unique<detail::SocketMonitor>(socket_, detail::kSocketBufferBytes, handshake_bytes, bans_,
                                                       !receives());
  }

  void require_open(const char* operation) const {
    if (closed_) throw TransportError(std::string(operation) + " on a closed connection (" + describe() + ")");
  }

  bool uses_ipc() const noexcept {
    for (const Endpoint& endpoint : endpoints_) {
      if (endpoint.address.starts_with("ipc://")) return true;
    }
    return false;
  }

  void require(bool ok, const char* operation) const {
    if (!ok) {
      throw TransportError(std::string(operation) + " is not possible on a " +
                           std::string(socket_kind_name(endpoints_.front().kind)) + " connection (" + describe() + ")");
    }
  }

  // wait_readable, but a receiver that keeps memory between messages gives
  // it back once it has waited long enough for the next: a trainer between
  // epochs or evaluating holds no batch memory it is not using.
  bool wait_readable_releasing_memory(std::chrono::steady_clock::time_point deadline) {
    const auto release = memory_.release_due(std::chrono::steady_clock::now());
    if (!release) return wait_readable(deadline);
    if (wait_readable(std::min(deadline, *release))) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    memory_.release();
    return wait_readable(deadline);
  }

  // wait_readable_releasing_memory, the time waited added to the statistics.
  bool wait_readable_counting_blocked(std::chrono::steady_clock::time_point deadline) {
    const auto start = Statistics::Clock::now();
    struct AddBlocked {
      Statistics& stats;
      Statistics::Clock::time_point start;
      ~AddBlocked() { stats.add_blocked(Statistics::Clock::now() - start); }
    } add_blocked{stats_, start};  // also when a signal interrupts the wait
    return wait_readable_releasing_memory(deadline);
  }

  // Polls until a message (PUB: a subscription) can be read or the deadline passes.
  bool wait_readable(std::chrono::steady_clock::time_point deadline) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    const bool forever = deadline == std::chrono::steady_clock::time_point::max();
    for (;;) {
      Milliseconds wait(-1);
      if (!forever) {
        auto left = deadline - std::chrono::steady_clock::now();
        if (left <= left.zero()) return false;
        wait = std::chrono::ceil<Milliseconds>(left);
      }
      try {
        if (zmq::poll(&item, 1, wait) > 0) return true;
      } catch (const zmq::error_t& e) {
        // EINTR too: a signal handler may want the program to stop.
        throw_transport("waiting for " + describe() + " failed", e);
      }
    }
  }

  using Frames = std::shared_ptr<std::vector<zmq::message_t>>;

  // Reads every part of one message; nothing if it proved too large.
  Frames receive_frames() {
    auto frames = std::make_shared<std::vector<zmq::message_t>>();
    std::int64_t total = 0;
    try {
      do {
        zmq::message_t& frame = frames->emplace_back();
        if (!socket_.recv(frame, zmq::recv_flags::none)) return nullptr;
        total += static_cast<std::int64_t>(frame.size());
      } while (frames->back().more());
    } catch (const zmq::error_t& e) {
      throw_transport("receive from " + describe() + " failed", e);
    }
    memory_.message_received();
    if (options_.max_message_size >= 0 && total > options_.max_message_size) {
      count_malformed(FormatErrorKind::kTooLarge, "message of " + std::to_string(total) +
                                                      " bytes exceeds max_message_size " +
                                                      std::to_string(options_.max_message_size));
      frames.reset();
      if (memory_.keeps()) memory_.release();  // a hostile size must not stay in the heap
      return nullptr;
    }
    return frames;
  }

  std::optional<TensorList> decode(Frames frames) {
    std::vector<FrameView> views;
    views.reserve(frames->size());
    for (zmq::message_t& frame : *frames) {
      // Every view shares ownership of the whole message.
      views.push_back({{static_cast<const std::byte*>(frame.data()), frame.size()}, frames});
    }
    try {
      TensorList batch = decode_message(views, options_.limits);
      const std::uint64_t wire_bytes = batch_bytes(batch);
      if (options_.decompress_threads > 0 && batch.size() > 2) {
        decompress_images(batch, options_.decompress_limits, options_.decompress_threads);
      }
      stats_.add(batch_size(batch), wire_bytes);
      return batch;
    } catch (const FormatError& e) {
      count_malformed(e.kind(), e.what());
      return std::nullopt;
    }
  }

  void count_malformed(FormatErrorKind kind, const std::string& detail) {
    if (malformed_.by_kind[kind]++ == 0) {
      log("tensorcom: skipping malformed message from " + describe() + ": " + detail +
          " (further messages of this kind are counted, not reported)");
    }
  }

  bool send_multipart(std::span<const Tensor> batch, zmq::send_flags first) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!socket_.send(header_frame(batch[i]), zmq::send_flags::sndmore | (i == 0 ? first : zmq::send_flags::none))) {
        return false;  // only the first frame can be refused (dontwait)
      }
      bool last = i + 1 == batch.size();
      socket_.send(data_frame(batch[i]), last ? zmq::send_flags::none : zmq::send_flags::sndmore);
    }
    return true;
  }

  bool send_single(std::span<const Tensor> batch, zmq::send_flags first) {
    SharedBuffer buffer = encode_buffer(batch);
    auto* hint = new std::shared_ptr<const void>(buffer.owner());
    return socket_.send(zmq::message_t(buffer.data(), buffer.size(), release_owner, hint), first).has_value();
  }

  // How long close() waits for a first peer before dropping queued batches:
  // a connect to a live peer, even reconnecting after a refusal, completes
  // well within it.
  static constexpr Milliseconds kPeerGrace{250};
  zmq::context_t context_;
  zmq::socket_t socket_;
  // Addresses of flooders, refused for a while (a sender's; a receiver's
  // stays empty). Before zap_ and monitor_, which share it.
  std::shared_ptr<detail::AddressBans> bans_ = std::make_shared<detail::AddressBans>();
  std::unique_ptr<detail::ZapHandler> zap_;             // allow-list and bans; stops before the context closes
  DroppedPeers dropped_peers_;                          // counted by a monitor since closed
  detail::SubscriptionLedger subscriptions_;            // PUB: as the XPUB messages tell them
  std::uint64_t fitted_bytes_ = 0;                      // batch size the send queue was fitted to
  std::unique_ptr<detail::PollSignal> poll_signal_;     // poll_descriptor()'s; stops before the socket closes
  std::unique_ptr<detail::DeliveryReceipts> receipts_;  // a receiver's; closes before the context
  bool closed_ = false;
  // Declared last: stops watching before the socket closes.
  std::unique_ptr<detail::SocketMonitor> monitor_;
};

// ---- Connection ----

Connection::Connection(std::span<const std::string> urls, ConnectionOptions options)
    : impl_(std::make_unique<Impl>(urls, std::move(options))) {}

Connection::Connection(std::initializer_list<std::string> urls, ConnectionOptions options)
    : Connection(std::span<const std::string>(urls.begin(), urls.size()), std::move(options)) {}

Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

std::optional<TensorList> Connection::recv(std::optional<Milliseconds> timeout) { return impl_->recv(timeout); }

bool Connection::send(std::span<const Tensor> batch) { return impl_->send(batch, impl_->options_.framing); }
bool Connection::send(std::span<const Tensor> batch, Framing framing) { return impl_->send(batch, framing); }
Connection::Sent Connection::try_send(std::span<const Tensor> batch) {
  return impl_->try_send(batch, impl_->options_.framing);
}
Connection::Sent Connection::try_send(std::span<const Tensor> batch, Framing framing) {
  return impl_->try_send(batch, framing);
}
void Connection::connect(std::span<const std::string> urls) { impl_->connect(urls); }
void Connection::close() {
  if (impl_) impl_->close();
}
bool Connection::closed() const noexcept { return !impl_ || impl_->closed(); }
void Connection::set_timeout(std::optional<Milliseconds> timeout) { impl_->options_.timeout = timeout; }
void Connection::set_linger(Milliseconds linger) { impl_->set_linger(linger); }
void Connection::set_high_water_marks(int send, int receive) { impl_->set_high_water_marks(send, receive); }

std::uint64_t Connection::serve(const std::function<std::optional<TensorList>()>& next, std::uint64_t report) {
  std::uint64_t count = 0;
  while (auto batch = next()) {
    if (!send(*batch)) continue;
    ++count;
    if (report > 0 && count % report == 0) {
      impl_->log("count " + std::to_string(impl_->stats_.samples()) + " " + impl_->stats_.summary());
    }
  }
  return count;
}

const std::vector<Endpoint>& Connection::endpoints() const noexcept { return impl_->endpoints_; }
std::vector<std::string> Connection::bound_addresses() const { return impl_->bound_; }
std::string Connection::describe() const { return impl_->describe(); }
const Statistics& Connection::stats() const noexcept { return impl_->stats_; }
Statistics& Connection::stats() noexcept { return impl_->stats_; }
const MalformedCounts& Connection::malformed() const noexcept { return impl_->malformed_; }
const ConnectionOptions& Connection::options() const noexcept { return impl_->options_; }
std::uint64_t Connection::size() const noexcept { return impl_->options_.epoch; }

// ---- iteration ----

// connection_controls.h: the controls beyond send and receive reach the
// connection's state through here.
struct detail::ConnectionAccess {
  static Connection::Impl& impl(Connection& c) { return *c.impl_; }
  static const Connection::Impl& impl(const Connection& c) { return *c.impl_; }
};

using detail::ConnectionAccess;

std::uint64_t subscribers(Connection& c) { return ConnectionAccess::impl(c).subscribers(); }
std::uint64_t subscribing_peers(Connection& c) { return ConnectionAccess::impl(c).subscribing_peers(); }
DroppedPeers dropped_peers(const Connection& c) { return ConnectionAccess::impl(c).dropped_peers(); }
std::uint64_t dropped_without_subscriber(const Connection& c) noexcept {
  return ConnectionAccess::impl(c).dropped_without_subscriber_;
}
std::uint64_t refused_peers(const Connection& c) noexcept { return ConnectionAccess::impl(c).refused_peers(); }
ConnectionCount connections(const Connection& c) noexcept { return ConnectionAccess::impl(c).connections(); }
bool wait_for_subscriber(Connection& c, std::optional<Milliseconds> timeout) {
  return ConnectionAccess::impl(c).wait_for_subscriber(timeout);
}
bool wait_writable(Connection& c, Milliseconds timeout) { return ConnectionAccess::impl(c).wait_writable(timeout); }
void shorten_linger_for_stop(Connection& c) { ConnectionAccess::impl(c).shorten_linger_for_stop(); }
int poll_descriptor(Connection& c) { return ConnectionAccess::impl(c).poll_descriptor(); }
bool message_waiting(Connection& c) { return ConnectionAccess::impl(c).message_waiting(); }

Connection::Iterator::Iterator(Connection* connection) : connection_(connection) { fetch(); }

TimeoutError Connection::silence_error() const {
  const std::string waited = options().timeout ? std::to_string(options().timeout->count()) + " ms" : "the timeout";
  return TimeoutError("no batch within " + waited + " from " + describe());
}

Connection::Iterator& Connection::Iterator::operator++() {
  fetch();
  return *this;
}

void Connection::Iterator::fetch() {
  const ConnectionOptions& options = connection_->options();
  if (options.total >= 0 && received_ >= options.total) {
    connection_ = nullptr;
    return;
  }
  auto batch = connection_->recv(options.timeout);
  if (!batch) throw connection_->silence_error();
  current_ = std::move(*batch);
  ++received_;
}

}  // namespace tensorcom
