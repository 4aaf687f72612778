#include <zmq.hpp>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <random>
#include <thread>

#include "receipt_wire.h"
#include "tensorcom/transport/delivery.h"

namespace tensorcom {

namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t random_word() {
  std::random_device device;
  std::uint64_t word = 0;
  while (word == 0) word = (std::uint64_t{device()} << 32) ^ device();
  return word;
}

std::string hex16(std::uint64_t word) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(word));
  return text;
}

// "HOST" of "tcp://HOST:PORT".
std::string tcp_host(const std::string& address) {
  const std::string rest = address.substr(6);
  return rest.substr(0, rest.rfind(':'));
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.starts_with("127."); }

// Where the receipt socket listens for tcp receivers: loopback when every
// tcp URL is, the one host every bound URL names, else everywhere (a
// connecting sender does not know which of its interfaces its receivers
// reach it on).
std::optional<std::string> tcp_receipt_host(const std::vector<Endpoint>& endpoints) {
  std::vector<std::string> hosts;
  for (const Endpoint& e : endpoints) {
    if (e.address.starts_with("tcp://")) hosts.push_back(e.bind ? tcp_host(e.address) : "*");
  }
  if (hosts.empty()) return std::nullopt;
  if (std::all_of(hosts.begin(), hosts.end(), [](const std::string& h) { return is_loopback(h); })) {
    return "127.0.0.1";
  }
  if (std::all_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return h == hosts[0]; })) return hosts[0];
  return "*";
}

bool has_ipc(const std::vector<Endpoint>& endpoints) {
  return std::any_of(endpoints.begin(), endpoints.end(),
                     [](const Endpoint& e) { return e.address.starts_with("ipc://"); });
}

std::string port_of(const std::string& endpoint) { return endpoint.substr(endpoint.rfind(':') + 1); }

}  // namespace

class ConfirmedDelivery::Impl {
 public:
  Impl(Connection& data, DeliveryOptions options) : data_(data), options_(std::move(options)) {
    const std::vector<Endpoint>& endpoints = data.endpoints();
    if (endpoints.empty() || endpoints.front().kind != SocketKind::kPush) {
      throw ArgumentError("confirmed delivery needs a PUSH connection, not " + data.describe());
    }
    receipt_.run = random_word();
    try {
      open_receipt_socket(endpoints, data.options());
    } catch (const zmq::error_t& e) {
      throw TransportError("cannot open a receipt socket beside " + data.describe() + ": " + e.what(), e.num());
    }
    if (receipt_.to.empty()) {
      throw ArgumentError("confirmed delivery needs a tcp or ipc URL (no receiver reaches inproc receipts): " +
                          data.describe());
    }
  }

  const DeliveryReceipt& receipt() const noexcept { return receipt_; }

  bool send(std::uint64_t sequence, TensorList batch, const StoppableSend& how) {
    Clock::time_point waiting_since = Clock::now();
    while (window_full()) {
      if (how.stop_requested && how.stop_requested()) return false;
      wait_for_receipts(how.slice);
      if (!resend_due(how)) return false;
      say_waiting(waiting_since, "room in the window of " + std::to_string(options_.window) + " batches");
    }
    if (!send_until_stopped(data_, batch, how)) return false;
    const std::uint64_t bytes = batch_bytes(batch);
    kept_[sequence] = Kept{std::move(batch), bytes, Clock::now(), std::nullopt};
    kept_bytes_ += bytes;
    ++counts_.sent;
    read_receipts();
    return resend_due(how);
  }

  std::uint64_t settle(Milliseconds timeout, const std::function<bool()>& stop_requested) {
    const auto deadline = Clock::now() + timeout;
    StoppableSend how;
    how.stop_requested = [&] { return Clock::now() >= deadline || (stop_requested && stop_requested()); };
    Clock::time_point waiting_since = Clock::now();
    while (!kept_.empty() && !how.stop_requested()) {
      wait_for_receipts(how.slice);
      if (!resend_due(how)) break;
      say_waiting(waiting_since, "receipts of " + std::to_string(kept_.size()) + " batches");
    }
    read_receipts();
    return kept_.size();
  }

  std::vector<std::uint64_t> unconfirmed() const {
    std::vector<std::uint64_t> out;
    for (const auto& [sequence, kept] : kept_) out.push_back(sequence);
    return out;
  }

  DeliveryCounts counts() const noexcept {
    DeliveryCounts c = counts_;
    c.unconfirmed = kept_.size();
    return c;
  }

 private:
  // A batch kept until confirmed.
  struct Kept {
    TensorList batch;
    std::uint64_t bytes = 0;
    Clock::time_point sent_at;
    std::optional<Clock::time_point> suspect_since;  // a connection was lost about when or since it was sent
  };

  void open_receipt_socket(const std::vector<Endpoint>& endpoints, const ConnectionOptions& data_options) {
    socket_ = zmq::socket_t(context_, zmq::socket_type::pull);
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(detail::kMaxReceiptBytes));
    socket_.set(zmq::sockopt::rcvhwm, 100000);
    if (data_options.curve) {
      const CurveKeyPair keys = generate_curve_keypair();
      socket_.set(zmq::sockopt::curve_server, 1);
      socket_.set(zmq::sockopt::curve_secretkey, keys.secret_key);
      receipt_.key = keys.public_key;
    }
    if (const std::optional<std::string> host = tcp_receipt_host(endpoints)) {
      if (*host == "*") socket_.set(zmq::sockopt::ipv6, 1);
      bind_tcp(*host);
    }
    if (has_ipc(endpoints)) {
      const std::string name = std::string(detail::kReceiptIpcPrefix) + hex16(random_word());
      socket_.bind("ipc://" + name);
      receipt_.to.push_back("ipc:" + name);
    }
  }

  void bind_tcp(const std::string& host) {
    try {
      socket_.bind("tcp://" + host + ":*");
    } catch (const zmq::error_t&) {
      if (host == "*") throw;
      // A name ZeroMQ does not take as an interface: every interface then.
      socket_.set(zmq::sockopt::ipv6, 1);
      socket_.bind("tcp://*:*");
    }
    receipt_.to.push_back("tcp:" + port_of(socket_.get(zmq::sockopt::last_endpoint)));
  }

  bool window_full() const { return kept_.size() >= options_.window || kept_bytes_ >= options_.window_bytes; }

  void wait_for_receipts(Milliseconds slice) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      (void)zmq::poll(&item, 1, slice);
    } catch (const zmq::error_t&) {
      // A signal: the caller looks for a stop.
    }
    read_receipts();
  }

  void read_receipts() {
    zmq::message_t message;
    for (;;) {
      try {
        if (!socket_.recv(message, zmq::recv_flags::dontwait)) return;
      } catch (const zmq::error_t&) {
        return;
      }
      const std::optional<detail::Receipt> receipt =
          detail::decode_receipt({static_cast<const std::byte*>(message.data()), message.size()});
      if (!receipt || receipt->run != receipt_.run) {
        ++counts_.bad_receipts;
        continue;
      }
      for (std::uint64_t sequence : receipt->sequences) confirm(sequence);
    }
  }

  void confirm(std::uint64_t sequence) {
    auto it = kept_.find(sequence);
    if (it == kept_.end()) return;  // a copy's receipt after the first's
    remember_delay(Clock::now() - it->second.sent_at);
    kept_bytes_ -= it->second.bytes;
    kept_.erase(it);
    ++counts_.confirmed;
  }

  void remember_delay(Clock::duration delay) {
    constexpr std::size_t kRecent = 32;
    recent_delays_.push_back(delay);
    if (recent_delays_.size() > kRecent) recent_delays_.pop_front();
  }

  Clock::duration resend_grace() const {
    Clock::duration longest{};
    for (Clock::duration d : recent_delays_) longest = std::max(longest, d);
    return std::max<Clock::duration>(options_.resend_after, 2 * longest);
  }

  // Whether a connection was lost after a batch was sent, or so shortly
  // before that the batch may have gone into its pipe: the monitor counts a
  // loss as the I/O thread sees it, and the socket takes the pipe out of
  // its rotation only later, dropping what it queued there meanwhile.
  bool loss_may_have_taken(const Kept& kept) const {
    constexpr std::chrono::seconds kLossSettling{1};
    return last_loss_seen_ && *last_loss_seen_ + kLossSettling >= kept.sent_at;
  }

  // Marks what may have gone with a lost connection, then sends again what
  // has stayed unconfirmed for the grace since. False if a stop came first.
  bool resend_due(const StoppableSend& how) {
    const auto now = Clock::now();
    if (const std::uint64_t lost = connections(data_).lost; lost != losses_seen_) {
      losses_seen_ = lost;
      last_loss_seen_ = now;
    }
    const Clock::duration grace = resend_grace();
    for (auto& [sequence, kept] : kept_) {
      if (!kept.suspect_since && loss_may_have_taken(kept)) kept.suspect_since = now;
      if (!kept.suspect_since || now - *kept.suspect_since < grace) continue;
      if (!send_until_stopped(data_, kept.batch, how)) return false;
      kept.sent_at = Clock::now();
      kept.suspect_since.reset();
      ++counts_.resent;
    }
    return true;
  }

  void say_waiting(Clock::time_point& since, const std::string& what) {
    constexpr std::chrono::seconds kEvery{10};
    if (!options_.log || Clock::now() - since < kEvery) return;
    since = Clock::now();
    options_.log("waiting for " + what + " (" + std::to_string(kept_.size()) +
                 " unconfirmed; receivers that never confirm, such as the Python reference's, need an unconfirmed "
                 "sender)");
  }

  Connection& data_;
  DeliveryOptions options_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  DeliveryReceipt receipt_;
  std::map<std::uint64_t, Kept> kept_;
  std::uint64_t kept_bytes_ = 0;
  std::deque<Clock::duration> recent_delays_;
  std::uint64_t losses_seen_ = 0;                    // connections lost, as last counted
  std::optional<Clock::time_point> last_loss_seen_;  // when that count last grew
  DeliveryCounts counts_;
};

ConfirmedDelivery::ConfirmedDelivery(Connection& data, DeliveryOptions options)
    : impl_(std::make_unique<Impl>(data, std::move(options))) {}
ConfirmedDelivery::~ConfirmedDelivery() = default;
const DeliveryReceipt& ConfirmedDelivery::receipt() const noexcept { return impl_->receipt(); }
bool ConfirmedDelivery::send(std::uint64_t sequence, TensorList batch, const StoppableSend& how) {
  return impl_->send(sequence, std::move(batch), how);
}
std::uint64_t ConfirmedDelivery::settle(Milliseconds timeout, const std::function<bool()>& stop_requested) {
  return impl_->settle(timeout, stop_requested);
}
std::vector<std::uint64_t> ConfirmedDelivery::unconfirmed() const { return impl_->unconfirmed(); }
DeliveryCounts ConfirmedDelivery::counts() const noexcept { return impl_->counts(); }

}  // namespace tensorcom
