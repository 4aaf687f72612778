// The metrics endpoint: one thread polling every connection, non-blocking
// sockets, a byte limit and a deadline per connection, and a cap on their
// number. cpp-httplib (Debian's 0.11) served it before, one connection at a
// time on a thread pool: it had no bound on a request line, no deadline for
// a whole request and an unbounded queue of accepted connections, so idle
// or slow clients could delay scrapes and stops without end
// (docs/security.md).
#include "tensorcom/metrics/metrics_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "http_exchange.h"
#include "tensorcom/codec/error.h"

namespace tensorcom::metrics {
namespace {

using Clock = std::chrono::steady_clock;

// Owns one file descriptor; closes it when destroyed or reset.
class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(Descriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~Descriptor() { reset(); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

[[nodiscard]] std::string system_error(const std::string& what, int code) { return what + ": " + std::strerror(code); }

// A non-blocking socket listening on host:port (the first address of host
// that takes it).
[[nodiscard]] Descriptor listen_on(const HostPort& where, const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int resolved = ::getaddrinfo(where.host.c_str(), std::to_string(where.port).c_str(), &hints, &found);
  if (resolved != 0) throw TransportError("metrics: cannot listen on " + address + ": " + ::gai_strerror(resolved));
  int code = 0;
  Descriptor listener;
  for (const addrinfo* a = found; a != nullptr && !listener.valid(); a = a->ai_next) {
    Descriptor s(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    const int on = 1;
    // A restarted server takes its port back at once, as httplib's did.
    if (s.valid()) ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (s.valid() && ::bind(s.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.get(), 128) == 0) {
      listener = std::move(s);
    } else {
      code = errno;
    }
  }
  ::freeaddrinfo(found);
  if (!listener.valid()) throw TransportError(system_error("metrics: cannot listen on " + address, code), code);
  return listener;
}

[[nodiscard]] int bound_port(const Descriptor& listener) {
  sockaddr_storage addr{};
  socklen_t size = sizeof addr;
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &size) != 0) return -1;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
}

// The cap on connections: the one asked for, and at most a quarter of the
// descriptor limit, so that a flood leaves the program descriptors for its
// own files whatever limit it runs under.
[[nodiscard]] std::size_t connection_cap(std::size_t asked) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return asked;
  return std::max<std::size_t>(1, std::min<std::size_t>(asked, limit.rlim_cur / 4));
}

// One client: its request head as it comes, then the reply as it goes.
struct Client {
  Descriptor socket;
  Clock::time_point deadline;
  std::string received;  // the head so far: at most max_request_bytes
  std::string reply;     // empty while the request is still coming
  std::size_t written = 0;

  [[nodiscard]] bool replying() const { return !reply.empty(); }
};

}  // namespace

class MetricsServer::Impl {
 public:
  Impl(const std::string& address, Collect collect, const MetricsServerLimits& limits)
      : collect_(std::move(collect)), limits_(limits), cap_(connection_cap(limits.max_connections)) {
    if (limits.max_request_bytes == 0 || limits.max_connections == 0 || limits.request_timeout.count() <= 0 ||
        limits.reply_timeout.count() <= 0) {
      throw ArgumentError("metrics: every MetricsServerLimits field must be above 0");
    }
    const HostPort where = parse_host_port(address);
    host_ = where.host;
    listener_ = listen_on(where, address);
    port_ = bound_port(listener_);
    int ends[2];
    if (::pipe2(ends, O_NONBLOCK | O_CLOEXEC) != 0) {
      throw TransportError(system_error("metrics: cannot make a wake-up pipe", errno), errno);
    }
    wake_read_.reset(ends[0]);
    wake_write_.reset(ends[1]);
    thread_ = std::thread([this] { serve(); });
  }

  ~Impl() {
    // One byte on the pipe ends the poll loop at once: no client can hold it.
    const char stop = 1;
    while (::write(wake_write_.get(), &stop, 1) < 0 && errno == EINTR) {
    }
    thread_.join();
  }

  [[nodiscard]] std::string url() const {
    const bool v6 = host_.find(':') != std::string::npos;
    return "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_) + "/metrics";
  }

 private:
  void serve() {
    std::vector<pollfd> polled;
    while (true) {
      polled.assign({{wake_read_.get(), POLLIN, 0}});
      const bool accepting = Clock::now() >= accept_paused_until_;
      if (accepting) polled.push_back({listener_.get(), POLLIN, 0});
      for (const Client& c : clients_) {
        polled.push_back({c.socket.get(), static_cast<short>(c.replying() ? POLLOUT : POLLIN), 0});
      }
      if (::poll(polled.data(), polled.size(), wait_ms()) < 0 && errno != EINTR) return;
      if (polled[0].revents != 0) return;
      const std::size_t first_client = accepting ? 2 : 1;
      // Clients first: accepting may close some (the cap), which would shift
      // them against their pollfds.
      for (std::size_t i = 0; i < clients_.size(); ++i) serve_client(clients_[i], polled[first_client + i].revents);
      drop_finished_and_late();
      if (accepting && polled[1].revents != 0) accept_all();
    }
  }

  // Until the first deadline (or the end of a pause in accepting).
  [[nodiscard]] int wait_ms() const {
    Clock::time_point next = Clock::time_point::max();
    for (const Client& c : clients_) next = std::min(next, c.deadline);
    if (Clock::now() < accept_paused_until_) next = std::min(next, accept_paused_until_);
    if (next == Clock::time_point::max()) return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
  }

  void accept_all() {
    while (true) {
      Descriptor s(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!s.valid()) {
        // Out of descriptors: the pending connection stays in the kernel's
        // queue and keeps the listener readable, so stop polling it a while
        // rather than spin.
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
        }
        return;
      }
      if (clients_.size() >= cap_ && !make_room()) continue;  // s closes: every slot is replying
      clients_.push_back({std::move(s), Clock::now() + limits_.request_timeout, {}, {}, 0});
    }
  }

  // Closes the oldest connection still sending its request. Returns false
  // if every connection is being answered.
  bool make_room() {
    auto oldest = clients_.end();
    for (auto c = clients_.begin(); c != clients_.end(); ++c) {
      if (!c->replying() && (oldest == clients_.end() || c->deadline < oldest->deadline)) oldest = c;
    }
    if (oldest == clients_.end()) return false;
    clients_.erase(oldest);
    return true;
  }

  void serve_client(Client& c, short revents) {
    if (revents == 0) return;
    if (c.replying()) {
      write_reply(c);
    } else if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      read_request(c);
    }
  }

  // Reads what fits under the byte limit; answers once the head is whole or
  // the limit is reached. Closes the connection on EOF or an error.
  void read_request(Client& c) {
    std::array<char, 4096> buffer;
    const std::size_t room = limits_.max_request_bytes - c.received.size();
    const ssize_t n = ::recv(c.socket.get(), buffer.data(), std::min(buffer.size(), room), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      c.socket.reset();
      return;
    }
    if (n < 0) return;
    c.received.append(buffer.data(), static_cast<std::size_t>(n));
    const std::size_t head = http::head_length(c.received);
    if (head != 0) {
      start_reply(c, answer(std::string_view(c.received).substr(0, head)));
    } else if (c.received.size() >= limits_.max_request_bytes) {
      start_reply(c, http::too_large());
    }
  }

  [[nodiscard]] std::string answer(std::string_view head) {
    const http::Ask ask = http::classify(head);
    if (ask != http::Ask::kMetrics) return http::refusal(ask);
    try {
      MetricsText text;
      collect_(text);
      return http::response(200, "OK", kMetricsContentType, text.text());
    } catch (const std::exception& e) {
      return http::response(500, "Internal Server Error", "text/plain; charset=utf-8", std::string(e.what()) + "\n");
    }
  }

  void start_reply(Client& c, std::string reply) {
    c.reply = std::move(reply);
    c.received = std::string();  // its memory back: the head is answered
    c.deadline = Clock::now() + limits_.reply_timeout;
    write_reply(c);
  }

  // Writes what the socket takes; closes the connection once all is sent
  // (the reply says "Connection: close") or on an error.
  void write_reply(Client& c) {
    const ssize_t n =
        ::send(c.socket.get(), c.reply.data() + c.written, c.reply.size() - c.written, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n < 0) {
      c.socket.reset();
      return;
    }
    c.written += static_cast<std::size_t>(n);
    if (c.written == c.reply.size()) {
      ::shutdown(c.socket.get(), SHUT_WR);
      c.socket.reset();
    }
  }

  void drop_finished_and_late() {
    const Clock::time_point now = Clock::now();
    std::erase_if(clients_, [now](const Client& c) { return !c.socket.valid() || c.deadline <= now; });
  }

  Collect collect_;
  MetricsServerLimits limits_;
  std::size_t cap_;
  std::string host_;
  int port_ = -1;
  Descriptor listener_;
  Descriptor wake_read_;
  Descriptor wake_write_;
  std::vector<Client> clients_;              // touched by the serving thread only
  Clock::time_point accept_paused_until_{};  // after running out of descriptors
  std::thread thread_;
};

MetricsServer::MetricsServer(const std::string& address, Collect collect, const MetricsServerLimits& limits)
    : impl_(std::make_unique<Impl>(address, std::move(collect), limits)) {}

MetricsServer::~MetricsServer() = default;

std::string MetricsServer::url() const { return impl_->url(); }

}  // namespace tensorcom::metrics
