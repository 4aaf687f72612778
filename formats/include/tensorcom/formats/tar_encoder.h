// Tar members encoded one group at a time, so that the size of a sample is
// known before it is given a shard. The format is POSIX pax as libarchive's
// "pax restricted" writes it: a plain ustar header, preceded by a pax extended
// header only when a name does not fit ustar (long or not ASCII).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tensorcom/formats/file_io.h"

struct archive;

namespace tensorcom::formats {

// What ends a tar file: two zero blocks.
inline constexpr std::size_t kTarEndSize = 1024;

// One tar member. data is borrowed for the duration of the call it is passed to.
struct TarMember {
  std::string name;
  std::span<const std::byte> data;
};

// Encodes groups of regular-file members with mode 0644, uid and gid 0, no
// user or group names, and one fixed mtime, so that equal input gives equal
// bytes. A tar file is any concatenation of encode() results followed by
// kTarEndSize zero bytes. Move-only; not thread-safe.
class TarEncoder {
 public:
  // mtime: seconds since the epoch recorded for every member.
  explicit TarEncoder(std::int64_t mtime);
  TarEncoder(TarEncoder&&) noexcept;
  TarEncoder& operator=(TarEncoder&&) noexcept;
  ~TarEncoder();

  // Returns the headers, contents and padding of members, in order. Names are
  // in the locale's charset (pax records carry them as UTF-8; names that do not
  // convert are kept as bytes, marked hdrcharset=BINARY). Throws
  // Error with libarchive's reason and the name.
  [[nodiscard]] ByteBuffer encode(std::span<const TarMember> members);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tensorcom::formats
