#include "poll_signal.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tensorcom/codec/error.h"

namespace tensorcom::detail {

namespace {

int make_eventfd() {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) throw TransportError(std::string("cannot make a descriptor to poll: ") + std::strerror(errno), errno);
  return fd;
}

void add_one(int fd) noexcept {
  const std::uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

}  // namespace

PollSignal::PollSignal(int zmq_fd) : zmq_fd_(zmq_fd), signal_fd_(make_eventfd()) {
  try {
    stop_fd_ = make_eventfd();
    watcher_ = std::thread([this] { watch(); });
  } catch (const std::system_error& e) {
    ::close(stop_fd_);
    ::close(signal_fd_);
    throw TransportError(std::string("cannot start the poll watcher: ") + e.what(), e.code().value());
  } catch (...) {
    if (stop_fd_ >= 0) ::close(stop_fd_);
    ::close(signal_fd_);
    throw;
  }
}

PollSignal::~PollSignal() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  settled_.notify_one();
  add_one(stop_fd_);
  watcher_.join();
  ::close(stop_fd_);
  ::close(signal_fd_);
}

void PollSignal::settle(bool message_waiting) {
  if (message_waiting) {
    raise_signal();
    return;
  }
  // Lowered before the watcher looks again: a signal that comes after the
  // socket was asked raises it anew.
  lower_signal();
  {
    std::lock_guard lock(mutex_);
    ++generation_;
  }
  settled_.notify_one();
}

void PollSignal::raise_signal() const noexcept { add_one(signal_fd_); }

void PollSignal::lower_signal() const noexcept {
  std::uint64_t count = 0;
  (void)!::read(signal_fd_, &count, sizeof count);  // EAGAIN when already 0
}

void PollSignal::watch() {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      settled_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    pollfd items[2] = {{zmq_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    while (::poll(items, 2, -1) < 0 && errno == EINTR) {
    }
    if ((items[1].revents & POLLIN) != 0) return;
    if ((items[0].revents & POLLIN) != 0) raise_signal();
  }
}

}  // namespace tensorcom::detail
