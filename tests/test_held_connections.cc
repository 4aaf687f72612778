// HeldConnections on real Unix-domain socket pairs: the peer sees no
// hang-up while a duplicate is held, and the wait ends when it has read.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <string>
#include <utility>

#include "held_connections.h"

using tensorcom::detail::HeldConnections;
using tensorcom::detail::unread_bytes;
using namespace std::chrono_literals;

namespace {

// A connected Unix-domain stream pair, closed on destruction.
struct SocketPair {
  int sender = -1;
  int receiver = -1;
  SocketPair() {
    std::array<int, 2> fds{};
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds.data()) == 0);
    sender = fds[0];
    receiver = fds[1];
  }
  ~SocketPair() {
    if (sender >= 0) ::close(sender);
    if (receiver >= 0) ::close(receiver);
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
  void close_sender() { ::close(std::exchange(sender, -1)); }
};

bool hung_up(int fd) {
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 0) >= 0);
  return (p.revents & POLLHUP) != 0;
}

std::size_t read_all(int fd) {
  std::array<char, 4096> buffer{};
  std::size_t total = 0;
  for (;;) {
    const ssize_t got = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (got <= 0) return total;
    total += static_cast<std::size_t>(got);
  }
}

void send_bytes(int fd, std::size_t count) {
  const std::string bytes(count, 'x');
  REQUIRE(::send(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(count));
}

// The pair's sender holds its connection, sends bytes and closes its own
// descriptor, as a sender's ZeroMQ socket does at the end of its linger.
HeldConnections sent_and_closed(SocketPair& pair, std::size_t bytes) {
  HeldConnections held;
  held.hold(pair.sender);
  send_bytes(pair.sender, bytes);
  pair.close_sender();
  return held;
}

}  // namespace

TEST_CASE("a held connection hangs up only when its duplicate closes") {
  SocketPair pair;
  HeldConnections held = sent_and_closed(pair, 1000);
  CHECK(held.size() == 1);
  CHECK_FALSE(hung_up(pair.receiver));
  CHECK(read_all(pair.receiver) == 1000);
  held.close_all();
  CHECK(hung_up(pair.receiver));
}

TEST_CASE("waiting on held connections ends when receivers have read, or at the deadline") {
  SocketPair pair;
  HeldConnections held = sent_and_closed(pair, 5000);
  CHECK(unread_bytes(pair.receiver) == 0);  // the receiver sent nothing
  CHECK_FALSE(held.wait_until_read(HeldConnections::Clock::now() + 20ms));
  CHECK(read_all(pair.receiver) == 5000);
  CHECK(held.wait_until_read(HeldConnections::Clock::now() + 1s));
  CHECK(held.wait_until_read(std::nullopt));
}

TEST_CASE("a receiver that goes counts as having read") {
  SocketPair pair;
  HeldConnections held = sent_and_closed(pair, 5000);
  ::close(std::exchange(pair.receiver, -1));
  CHECK(held.wait_until_read(std::nullopt));
}

TEST_CASE("a lost connection's duplicate closes; descriptors that are no sockets are left alone") {
  SocketPair pair;
  HeldConnections held;
  held.hold(pair.sender);
  held.release(pair.sender);
  CHECK(held.size() == 0);
  pair.close_sender();
  CHECK(hung_up(pair.receiver));

  std::array<int, 2> pipe_fds{};
  REQUIRE(::pipe(pipe_fds.data()) == 0);
  held.hold(pipe_fds[1]);
  held.hold(-1);
  held.hold(987654);
  CHECK(held.size() == 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

TEST_CASE("holding a descriptor number again replaces the duplicate it had") {
  SocketPair first;
  HeldConnections held;
  held.hold(first.sender);
  held.hold(first.sender);
  CHECK(held.size() == 1);
  HeldConnections moved = std::move(held);
  CHECK(moved.size() == 1);
  first.close_sender();
  CHECK_FALSE(hung_up(first.receiver));
  moved.close_all();
  CHECK(hung_up(first.receiver));
}
