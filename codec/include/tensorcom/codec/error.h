// The one error family of tensorcom. Every failure that reaches a caller is a
// tensorcom::Error; the subclasses say which part failed. "Nothing yet"
// (a timeout, the end of a stream) is never an exception: it is an empty
// std::optional at the API that can produce it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tensorcom {

// Base of every tensorcom exception. what() names what was wrong and where.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What was wrong with malformed input, for counting: a receiving Connection
// counts the messages it skips by kind (MalformedCounts in connection.h).
enum class FormatErrorKind : std::uint8_t {
  kBadHeader,         // a tensor header: too short, unknown dtype, info not ASCII, bad ndim or dimension
  kDataPayload,       // a data payload shorter than its header declares
  kOddFrameCount,     // multipart: a header frame without its data frame
  kTooManyTensors,    // more tensors than DecodeLimits::max_tensors
  kChunkPrefix,       // single buffer: a chunk prefix cut short
  kBadMagic,          // single buffer: a chunk that does not start with "~TenBin~"
  kChunkLength,       // single buffer: a chunk longer than what remains
  kOddChunkCount,     // single buffer: a header chunk without its data chunk
  kTooLarge,          // a message over the receiver's limit (ConnectionOptions::max_message_size)
  kMetadata,          // a metadata tensor that does not hold what metadata.h describes
  kListLength,        // a .ten file whose tensors do not split into lists of the length given or inferred
  kCompressedImages,  // compressed images (compressed_images.h) that do not decode to what they declare
  kOther,             // input outside the tenbin format (image files, list files, class tables)
};

// Returns: the kind in words, as MalformedCounts::by_name() spells it:
//   "bad header", "data payload", "odd frame count", "too many tensors", ...
[[nodiscard]] std::string_view format_error_kind_name(FormatErrorKind kind) noexcept;

// Malformed outside input: a tenbin buffer, frame list or metadata map that
// does not follow the format. offset() is the byte offset of the bad field
// within the input that was being decoded; kind() says what was wrong, in a
// way that rewording the message does not change.
class FormatError : public Error {
 public:
  FormatError(FormatErrorKind kind, const std::string& message, std::uint64_t offset)
      : Error(message + " (at byte " + std::to_string(offset) + ")"), message_(message), offset_(offset), kind_(kind) {}
  // Input outside the tenbin format: kind() is kOther.
  FormatError(const std::string& message, std::uint64_t offset)
      : FormatError(FormatErrorKind::kOther, message, offset) {}
  // what() without the offset, for adding context in front.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  [[nodiscard]] FormatErrorKind kind() const noexcept { return kind_; }
  // The same error, with `context` ("tensor 3: ", "file.ten: ") before the message.
  [[nodiscard]] FormatError with_context(const std::string& context) const {
    return FormatError(kind_, context + message_, offset_);
  }

 private:
  std::string message_;
  std::uint64_t offset_;
  FormatErrorKind kind_;
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
