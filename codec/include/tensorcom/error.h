// The one error family of tensorcom. Every failure that reaches a caller is a
// tensorcom::Error; the subclasses say which part failed. "Nothing yet"
// (a timeout, the end of a stream) is never an exception: it is an empty
// std::optional at the API that can produce it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tensorcom {

// Base of every tensorcom exception. what() names what was wrong and where.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Malformed outside input: a tenbin buffer, frame list or metadata map that
// does not follow the format. offset() is the byte offset of the bad field
// within the input that was being decoded.
class FormatError : public Error {
 public:
  FormatError(const std::string& message, std::uint64_t offset)
      : Error(message + " (at byte " + std::to_string(offset) + ")"), message_(message), offset_(offset) {}
  // what() without the offset, for adding context in front.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }

 private:
  std::string message_;
  std::uint64_t offset_;
};

// A caller passed something the API cannot accept (bad dtype name, info longer
// than 8 characters, a tensor whose size does not match its shape...).
class ArgumentError : public Error {
 public:
  using Error::Error;
};

// A system call on a file failed; code() is the errno it reported.
class IoError : public Error {
 public:
  IoError(const std::string& what, int code);
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

// A tensorcom URL that cannot be used; the message names the URL.
class UrlError : public Error {
 public:
  using Error::Error;
};

// The messaging layer failed; code() is the errno ZeroMQ reported (0 if
// none), and what() already carries ZeroMQ's own words for it.
class TransportError : public Error {
 public:
  explicit TransportError(const std::string& what, int code = 0) : Error(what), code_(code) {}
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

// Every peer was silent past the timeout of an operation that cannot return
// "nothing yet" (iterating a Connection); the message names the URLs.
class TimeoutError : public TransportError {
 public:
  explicit TimeoutError(const std::string& what) : TransportError(what, 0) {}
};

// A feature that this build of tensorcom was configured without (CUDA, say).
class UnavailableError : public Error {
 public:
  using Error::Error;
};

}  // namespace tensorcom
