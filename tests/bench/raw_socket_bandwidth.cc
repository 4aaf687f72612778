// raw-socket-bandwidth: the bandwidth of a plain stream socket, as a yardstick
// for the ZeroMQ transport benchmark. It moves the same bytes the ZeroMQ
// benchmark moves (by default the 256 uint8 images of one 224x224x3 batch)
// over a Unix-domain socket and over TCP loopback, in the same run,
// so that "ZeroMQ reaches X% of the raw socket" compares like with like.
//
// A sender thread and a receiver thread in this process talk through a real
// listener (not socketpair) so the kernel path is the one ZeroMQ uses. Each
// message is an 8-byte little-endian length prefix and the payload; both
// sides use one buffer each, allocated and faulted in before timing, so the
// figure is the socket's and not the allocator's or the page-fault handler's.
//
// Usage: raw-socket-bandwidth [--bytes N] [--count N] [--warmup N]
//                             [--transport unix|tcp|both] [--json]
// Prints one line per transport; socket failures exit 1, bad options exit 2.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

constexpr std::string_view kProgram = "raw-socket-bandwidth";
// The image bytes of one ImageNet-sized batch, 256 x 224x224x3 uint8
// (38535168), the default message size of the ZeroMQ benchmark.
constexpr std::uint64_t kDefaultBytes = 256ULL * 224 * 224 * 3;
constexpr std::uint64_t kDefaultCount = 40;
constexpr std::uint64_t kDefaultWarmup = 3;
// Matches the buffer size the ZeroMQ side asks for, so neither side gets a
// bigger kernel window than the other.
constexpr int kSocketBufferBytes = 4 * 1024 * 1024;
constexpr std::size_t kPrefixBytes = 8;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr std::string_view kUsage =
    "usage: raw-socket-bandwidth [--bytes N] [--count N] [--warmup N]\n"
    "                            [--transport unix|tcp|both] [--json]\n"
    "  --bytes N       message payload size in bytes (default 38535168)\n"
    "  --count N       timed messages per transport (default 40)\n"
    "  --warmup N      untimed messages sent first (default 3)\n"
    "  --transport T   unix, tcp or both (default both)\n"
    "  --json          one JSON object per transport instead of text\n";

// ---------------------------------------------------------------- errors

// A failed system call; what() is "<call> failed: <strerror>".
class SysError : public std::runtime_error {
 public:
  SysError(const std::string& call, int code) : std::runtime_error(call + " failed: " + std::strerror(code)) {}
};

// A run that completed its calls but moved the wrong bytes.
class CheckError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A command line we cannot use; reported with the usage text.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------- RAII

// Owns one file descriptor; closing it is what tells the peer thread to stop,
// so every exit path must close it.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }

  void reset(int fd = -1) noexcept {
    // close() is not retried on EINTR: on Linux the descriptor is gone either
    // way, and a retry could close a descriptor another thread just opened.
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// A fresh private directory for the Unix socket's path, removed when done.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = (base != nullptr && *base != '\0') ? base : "/tmp";
    pattern += "/raw-socket-bandwidth.XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) == nullptr) throw SysError("mkdtemp", errno);
    path_ = buffer.data();
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { ::rmdir(path_.c_str()); }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

// Unlinks a bound socket's path on scope exit, so the TempDir can be removed.
class UnlinkOnExit {
 public:
  explicit UnlinkOnExit(std::string path) : path_(std::move(path)) {}
  UnlinkOnExit(const UnlinkOnExit&) = delete;
  UnlinkOnExit& operator=(const UnlinkOnExit&) = delete;
  ~UnlinkOnExit() { ::unlink(path_.c_str()); }

 private:
  std::string path_;
};

// The first error any thread hit. The receiver failing makes the sender fail
// too (EPIPE), so only the first one is the cause worth reporting.
class FirstError {
 public:
  void record(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::move(error);
  }
  void rethrow_if_any() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::mutex mutex_;
  std::exception_ptr error_;
};

// ---------------------------------------------------------------- options

enum class Transport { kUnix, kTcp };

struct Options {
  std::uint64_t bytes = kDefaultBytes;
  std::uint64_t count = kDefaultCount;
  std::uint64_t warmup = kDefaultWarmup;
  std::vector<Transport> transports = {Transport::kUnix, Transport::kTcp};
  bool json = false;
};

std::uint64_t parse_count(std::string_view flag, std::string_view text, std::uint64_t minimum) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < minimum) {
    throw UsageError(std::string(flag) + " needs an integer >= " + std::to_string(minimum) + ", got '" +
                     std::string(text) + "'");
  }
  return value;
}

std::vector<Transport> parse_transports(std::string_view text) {
  if (text == "unix") return {Transport::kUnix};
  if (text == "tcp") return {Transport::kTcp};
  if (text == "both") return {Transport::kUnix, Transport::kTcp};
  throw UsageError("--transport needs unix, tcp or both, got '" + std::string(text) + "'");
}

// Returns false when --help was asked for.
bool parse_options(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") return false;
    if (flag == "--json") {
      options.json = true;
      continue;
    }
    if (i + 1 >= argc) throw UsageError("unknown option or missing value: '" + std::string(flag) + "'");
    const std::string_view value = argv[++i];
    if (flag == "--bytes") {
      options.bytes = parse_count(flag, value, 1);
    } else if (flag == "--count") {
      options.count = parse_count(flag, value, 1);
    } else if (flag == "--warmup") {
      options.warmup = parse_count(flag, value, 0);
    } else if (flag == "--transport") {
      options.transports = parse_transports(value);
    } else {
      throw UsageError("unknown option '" + std::string(flag) + "'");
    }
  }
  return true;
}

// ---------------------------------------------------------------- payload

// A byte pattern with no short period, so a dropped or repeated chunk of the
// stream shows up at the checked offsets.
constexpr std::byte pattern_byte(std::uint64_t offset) {
  return static_cast<std::byte>(((offset * 0x9E3779B1ULL) >> 24) & 0xFF);
}

std::vector<std::byte> make_send_buffer(std::uint64_t bytes) {
  std::vector<std::byte> buffer(bytes);
  for (std::uint64_t i = 0; i < bytes; ++i) buffer[i] = pattern_byte(i);
  return buffer;
}

// Filled with a non-zero byte so the compiler cannot turn the allocation into
// a lazily-zeroed calloc: every page is faulted in here, not while timing.
std::vector<std::byte> make_receive_buffer(std::uint64_t bytes) {
  return std::vector<std::byte>(bytes, std::byte{0xA5});
}

std::array<std::byte, kPrefixBytes> encode_length(std::uint64_t length) {
  std::array<std::byte, kPrefixBytes> prefix{};
  for (std::size_t i = 0; i < kPrefixBytes; ++i) prefix[i] = static_cast<std::byte>(length >> (8 * i));
  return prefix;
}

std::uint64_t decode_length(std::span<const std::byte, kPrefixBytes> prefix) {
  std::uint64_t length = 0;
  for (std::size_t i = 0; i < kPrefixBytes; ++i) length |= std::to_integer<std::uint64_t>(prefix[i]) << (8 * i);
  return length;
}

// Offsets checked in message `index`: both ends, the middle, and one that
// moves from message to message.
std::array<std::uint64_t, 4> check_offsets(std::uint64_t bytes, std::uint64_t index) {
  return {0, bytes / 2, bytes - 1, (index * 7919ULL * 4099ULL + 12345ULL) % bytes};
}

// ---------------------------------------------------------------- socket I/O

// Writes every byte of `parts` in order, however short each sendmsg is.
// MSG_NOSIGNAL: a receiver that gave up must make us fail with EPIPE, not
// kill the process with SIGPIPE.
void send_all(int fd, std::span<iovec> parts) {
  while (!parts.empty()) {
    msghdr message{};
    message.msg_iov = parts.data();
    message.msg_iovlen = parts.size();
    const ssize_t sent = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      throw SysError("sendmsg", errno);
    }
    auto left = static_cast<std::size_t>(sent);
    while (!parts.empty() && left >= parts.front().iov_len) {
      left -= parts.front().iov_len;
      parts = parts.subspan(1);
    }
    if (!parts.empty()) {
      parts.front().iov_base = static_cast<char*>(parts.front().iov_base) + left;
      parts.front().iov_len -= left;
    }
  }
}

// Fills `buffer` completely with large read() calls.
void read_exact(int fd, std::span<std::byte> buffer) {
  while (!buffer.empty()) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      throw SysError("read", errno);
    }
    if (got == 0) throw CheckError("read failed: connection closed in the middle of a message");
    buffer = buffer.subspan(static_cast<std::size_t>(got));
  }
}

void expect_end_of_stream(int fd) {
  std::byte extra{};
  for (;;) {
    const ssize_t got = ::read(fd, &extra, 1);
    if (got == 0) return;
    if (got > 0) throw CheckError("stream check failed: bytes after the last message");
    if (errno != EINTR) throw SysError("read", errno);
  }
}

// Best effort: the kernel may clamp or refuse, and the benchmark is still
// meaningful with its defaults, so failures are ignored as asked.
void set_buffer_sizes(int fd) {
  const int size = kSocketBufferBytes;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

// ZeroMQ sets TCP_NODELAY on its TCP sockets; do the same so Nagle does not
// hold back the tail of each message here but not there.
void set_no_delay(int fd) {
  const int on = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) < 0) throw SysError("setsockopt", errno);
}

UniqueFd make_socket(int domain) {
  const int fd = ::socket(domain, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw SysError("socket", errno);
  UniqueFd socket(fd);
  // Before listen/connect, so TCP's window scale is chosen for the big buffer.
  set_buffer_sizes(socket.get());
  return socket;
}

// An interrupted connect() keeps going in the kernel; calling it again would
// say EALREADY, so wait for it to finish and read its outcome instead.
void connect_to(int fd, const sockaddr* address, socklen_t length) {
  if (::connect(fd, address, length) == 0) return;
  if (errno != EINTR) throw SysError("connect", errno);
  pollfd waiting{fd, POLLOUT, 0};
  while (::poll(&waiting, 1, -1) < 0) {
    if (errno != EINTR) throw SysError("poll", errno);
  }
  int error = 0;
  socklen_t error_length = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &error_length) < 0) throw SysError("getsockopt", errno);
  if (error != 0) throw SysError("connect", error);
}

UniqueFd accept_from(int listener) {
  for (;;) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      UniqueFd socket(fd);
      set_buffer_sizes(socket.get());
      return socket;
    }
    if (errno != EINTR) throw SysError("accept", errno);
  }
}

void listen_on(int fd) {
  if (::listen(fd, 1) < 0) throw SysError("listen", errno);
}

// The two ends of one connection: the connecting side sends, the accepted
// side receives (as a ZeroMQ PUSH connecting to a bound PULL would).
struct Connection {
  UniqueFd sender;
  UniqueFd receiver;
};

// A connect() to a listening socket completes from the backlog without a
// matching accept() in flight, so one thread can set up both ends.
Connection connect_unix() {
  const TempDir directory;
  const std::string path = directory.path() + "/socket";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) throw SysError("bind", ENAMETOOLONG);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const auto* generic = reinterpret_cast<const sockaddr*>(&address);

  const UniqueFd listener = make_socket(AF_UNIX);
  if (::bind(listener.get(), generic, sizeof address) < 0) throw SysError("bind", errno);
  // Once connected the path is not needed; it and the directory go when this
  // function returns, before anything is timed.
  const UnlinkOnExit unlink_socket(path);
  listen_on(listener.get());
  Connection connection;
  connection.sender = make_socket(AF_UNIX);
  connect_to(connection.sender.get(), generic, sizeof address);
  connection.receiver = accept_from(listener.get());
  return connection;
}

Connection connect_tcp() {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;  // Let the kernel pick a free port; no clashes with a parallel run.
  auto* generic = reinterpret_cast<sockaddr*>(&address);

  const UniqueFd listener = make_socket(AF_INET);
  if (::bind(listener.get(), generic, sizeof address) < 0) throw SysError("bind", errno);
  socklen_t length = sizeof address;
  if (::getsockname(listener.get(), generic, &length) < 0) throw SysError("getsockname", errno);
  listen_on(listener.get());
  Connection connection;
  connection.sender = make_socket(AF_INET);
  connect_to(connection.sender.get(), generic, length);
  connection.receiver = accept_from(listener.get());
  set_no_delay(connection.sender.get());
  set_no_delay(connection.receiver.get());
  return connection;
}

// ---------------------------------------------------------------- threads

struct Plan {
  std::uint64_t bytes;
  std::uint64_t warmup;
  std::uint64_t count;
};

void send_messages(int fd, const Plan& plan, std::span<const std::byte> payload) {
  auto prefix = encode_length(plan.bytes);
  for (std::uint64_t i = 0; i < plan.warmup + plan.count; ++i) {
    // sendmsg does not write through iov_base; the cast only fits its type.
    iovec parts[2] = {{prefix.data(), prefix.size()}, {const_cast<std::byte*>(payload.data()), payload.size()}};
    send_all(fd, parts);
  }
}

// Poisons the checked offsets first: the buffer is reused, so without this a
// message that never arrived would still pass on the previous one's bytes.
void receive_one(int fd, const Plan& plan, std::uint64_t index, std::span<std::byte> buffer,
                 std::chrono::steady_clock::time_point* first_byte) {
  std::array<std::byte, kPrefixBytes> prefix{};
  read_exact(fd, prefix);
  if (first_byte != nullptr) *first_byte = std::chrono::steady_clock::now();
  const std::uint64_t length = decode_length(prefix);
  if (length != plan.bytes) {
    throw CheckError("length check failed: message " + std::to_string(index) + " says " + std::to_string(length) +
                     " bytes, expected " + std::to_string(plan.bytes));
  }
  const auto offsets = check_offsets(plan.bytes, index);
  for (const std::uint64_t offset : offsets) buffer[offset] = ~pattern_byte(offset);
  read_exact(fd, buffer);
  for (const std::uint64_t offset : offsets) {
    if (buffer[offset] != pattern_byte(offset)) {
      throw CheckError("payload check failed: message " + std::to_string(index) + " differs at byte " +
                       std::to_string(offset));
    }
  }
}

// Returns the seconds from the first byte of the first timed message to the
// last byte of the last one: the receiver's view, which is what a consumer of
// batches experiences.
double receive_messages(int fd, const Plan& plan, std::span<std::byte> buffer) {
  using Clock = std::chrono::steady_clock;
  for (std::uint64_t i = 0; i < plan.warmup; ++i) receive_one(fd, plan, i, buffer, nullptr);
  Clock::time_point start;
  receive_one(fd, plan, plan.warmup, buffer, &start);
  for (std::uint64_t i = plan.warmup + 1; i < plan.warmup + plan.count; ++i) receive_one(fd, plan, i, buffer, nullptr);
  const Clock::time_point end = Clock::now();
  expect_end_of_stream(fd);
  return std::chrono::duration<double>(end - start).count();
}

// Thread bodies take the descriptor by value: it closes when the body
// returns, after any error is recorded, so a peer blocked on it wakes up
// (EOF or EPIPE) instead of hanging the join.
void sender_thread(UniqueFd fd, Plan plan, std::span<const std::byte> payload, FirstError& error) {
  try {
    send_messages(fd.get(), plan, payload);
  } catch (...) {
    error.record(std::current_exception());
  }
}

void receiver_thread(UniqueFd fd, Plan plan, std::span<std::byte> buffer, double& seconds, FirstError& error) {
  try {
    seconds = receive_messages(fd.get(), plan, buffer);
  } catch (...) {
    error.record(std::current_exception());
  }
}

// ---------------------------------------------------------------- driver

struct Buffers {
  std::vector<std::byte> send;
  std::vector<std::byte> receive;
};

double measure(Transport transport, const Plan& plan, Buffers& buffers) {
  Connection connection = transport == Transport::kUnix ? connect_unix() : connect_tcp();
  FirstError error;
  double seconds = 0.0;
  {
    // jthread joins in its destructor, so both threads are joined even if
    // starting the second one throws.
    const std::jthread receiver(receiver_thread, std::move(connection.receiver), plan,
                                std::span<std::byte>(buffers.receive), std::ref(seconds), std::ref(error));
    const std::jthread sender(sender_thread, std::move(connection.sender), plan,
                              std::span<const std::byte>(buffers.send), std::ref(error));
  }
  error.rethrow_if_any();
  return seconds;
}

std::string_view transport_name(Transport transport) { return transport == Transport::kUnix ? "unix" : "tcp"; }

void print_result(Transport transport, const Options& options, double seconds) {
  // A clock tick as the floor keeps a tiny run from printing inf (not JSON).
  const double total_bytes = static_cast<double>(options.bytes) * static_cast<double>(options.count);
  const double gb_per_s = total_bytes / std::max(seconds, 1e-9) / 1e9;
  const auto name = std::string(transport_name(transport));
  const auto bytes = static_cast<unsigned long long>(options.bytes);
  const auto count = static_cast<unsigned long long>(options.count);
  if (options.json) {
    std::printf("{\"transport\":\"%s\",\"bytes\":%llu,\"count\":%llu,\"gb_per_s\":%.3f}\n", name.c_str(), bytes, count,
                gb_per_s);
  } else {
    std::printf("raw %-4s  %llu B x %llu: %.3f GB/s\n", name.c_str(), bytes, count, gb_per_s);
  }
  // Flushed per line so a driver reading a pipe sees each transport at once.
  std::fflush(stdout);
}

int run(int argc, char** argv) {
  Options options;
  if (!parse_options(argc, argv, options)) {
    std::fputs(kUsage.data(), stdout);
    return 0;
  }
  // Allocated once for all transports, before any timing.
  Buffers buffers{make_send_buffer(options.bytes), make_receive_buffer(options.bytes)};
  const Plan plan{options.bytes, options.warmup, options.count};
  for (const Transport transport : options.transports) {
    print_result(transport, options, measure(transport, plan, buffers));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "%s: %s\n%s", kProgram.data(), error.what(), kUsage.data());
    return kExitUsage;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", kProgram.data(), error.what());
    return kExitFailure;
  }
}
