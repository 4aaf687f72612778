#include "held_connections.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <utility>

namespace tensorcom::detail {

namespace {

bool is_unix_stream_socket(int fd) noexcept {
  int domain = 0;
  int type = 0;
  socklen_t size = sizeof domain;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &size) != 0) return false;
  size = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) != 0) return false;
  return domain == AF_UNIX && type == SOCK_STREAM;
}

}  // namespace

std::size_t unread_bytes(int fd) noexcept {
  // For a Unix-domain socket SIOCOUTQ counts the bytes sent and not yet
  // consumed by the peer; a peer that closed freed them.
  int queued = 0;
  if (::ioctl(fd, SIOCOUTQ, &queued) != 0 || queued < 0) return 0;
  return static_cast<std::size_t>(queued);
}

HeldConnections::~HeldConnections() { close_all(); }

HeldConnections::HeldConnections(HeldConnections&& other) noexcept
    : duplicates_(std::exchange(other.duplicates_, {})) {}

HeldConnections& HeldConnections::operator=(HeldConnections&& other) noexcept {
  if (this != &other) {
    close_all();
    duplicates_ = std::exchange(other.duplicates_, {});
  }
  return *this;
}

void HeldConnections::hold(int fd) {
  if (!is_unix_stream_socket(fd)) return;
  release(fd);  // a descriptor number reused before its loss was read
  const int duplicate = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  // Without a duplicate (no descriptors left) the connection is delivered
  // as ZeroMQ alone delivers it.
  if (duplicate >= 0) duplicates_.emplace(fd, duplicate);
}

void HeldConnections::release(int fd) {
  const auto found = duplicates_.find(fd);
  if (found == duplicates_.end()) return;
  (void)::close(found->second);
  duplicates_.erase(found);
}

bool HeldConnections::wait_until_read(std::optional<Clock::time_point> deadline) const {
  constexpr std::chrono::milliseconds kPoll{2};
  for (;;) {
    bool all_read = true;
    for (const auto& [fd, duplicate] : duplicates_) all_read = all_read && unread_bytes(duplicate) == 0;
    if (all_read) return true;
    if (deadline && Clock::now() >= *deadline) return false;
    std::this_thread::sleep_for(kPoll);
  }
}

void HeldConnections::close_all() noexcept {
  for (const auto& [fd, duplicate] : duplicates_) (void)::close(duplicate);
  duplicates_.clear();
}

}  // namespace tensorcom::detail
