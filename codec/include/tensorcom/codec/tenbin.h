// The tenbin codec: byte-compatible with the Python reference (tensorcom and
// webdataset). The format is written down in the project's docs/tenbin.md:
//
//   tensor         = header chunk, data chunk
//   header payload = int64 words: dtype code, info, ndim, dims...
//   single buffer  = per chunk: "~TenBin~", int64 payload length, payload,
//                    zero padding to a multiple of 64 of the payload length
//   multipart      = one ZeroMQ frame per chunk, payload only
//
// Decoders treat their input as hostile: every length, ndim, dim, dtype code
// and chunk count is checked before use, errors are FormatError naming the
// field, its value and its byte offset, and decoded tensors are views into the
// input (no allocation beyond what the input's own size implies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorcom/codec/tensor.h"

namespace tensorcom {

inline constexpr std::string_view kTenbinMagic = "~TenBin~";
// Prefix of a single-buffer chunk: magic and payload length.
inline constexpr std::size_t kChunkPrefixSize = 16;
// Payloads are padded to a multiple of this.
inline constexpr std::size_t kChunkPadding = 64;
// The reference writes ndim < 10; we write and read up to this.
inline constexpr std::size_t kMaxNdim = 32;

struct DecodeLimits {
  std::size_t max_ndim = kMaxNdim;     // largest ndim a header may declare
  std::size_t max_tensors = 1u << 16;  // most tensors one list may hold
};

// ---- headers ----

// Bytes of the header payload of a tensor: 8 * (3 + ndim).
[[nodiscard]] std::size_t header_size(const Tensor& tensor) noexcept;
// Writes the header payload. REQUIRES: out.size() >= header_size(tensor).
// Throws ArgumentError if the tensor has more than kMaxNdim dimensions.
void write_header(const Tensor& tensor, std::span<std::byte> out);

struct TensorHeader {
  DType dtype = DType::kUInt8;
  std::string info;
  Shape shape;
  std::size_t data_size = 0;  // prod(shape) * itemsize
};
// Decodes a header payload. base_offset is added to offsets in errors.
// Throws FormatError.
[[nodiscard]] TensorHeader decode_header(std::span<const std::byte> header, std::uint64_t base_offset = 0,
                                         const DecodeLimits& limits = {});
// Decodes the header payload of tensor number `index` (named in messages)
// and checks that its data payload, data_size bytes at data_offset, holds
// what the header declares. Throws FormatError, as TensorDecoder::next().
[[nodiscard]] TensorHeader decode_tensor_header(std::size_t index, std::span<const std::byte> header,
                                                std::uint64_t header_offset, std::size_t data_size,
                                                std::uint64_t data_offset, const DecodeLimits& limits = {});

// ---- single-buffer encoding ----

// Size of one encoded chunk: 16 + payload rounded up to 64.
[[nodiscard]] std::size_t chunk_size(std::size_t payload_size) noexcept;
// Size of the single-buffer encoding of a list.
[[nodiscard]] std::size_t encoded_size(std::span<const Tensor> tensors);
// Encodes into out and returns the bytes written (== encoded_size).
// Throws ArgumentError if out is too small.
std::size_t encode_into(std::span<const Tensor> tensors, std::span<std::byte> out);
// Encodes into a fresh 64-byte-aligned buffer.
[[nodiscard]] SharedBuffer encode_buffer(std::span<const Tensor> tensors);
// Whether bytes start with the single-buffer magic.
[[nodiscard]] bool starts_with_magic(std::span<const std::byte> bytes) noexcept;
// Checks the prefix of the chunk at `offset` of a single-buffer stream that
// has `remaining` bytes from there on (prefix included); `prefix` holds its
// first min(16, remaining) bytes. Returns the payload length. Throws
// FormatError as ChunkReader::next(): a prefix cut short, a bad magic, a
// length that is negative or longer than what remains. For readers that
// walk a stream without holding it (.ten files read with pread).
[[nodiscard]] std::size_t chunk_payload_length(std::span<const std::byte> prefix, std::uint64_t remaining,
                                               std::uint64_t offset);

// Walks the chunks of a single-buffer stream (one or more lists back to back).
class ChunkReader {
 public:
  explicit ChunkReader(std::span<const std::byte> bytes) noexcept : bytes_(bytes) {}
  // Returns the next chunk's payload, or nothing at the end of the input.
  // Throws FormatError for a bad magic, a negative or overlong length, or a
  // chunk cut short (its padding may be missing only at the very end).
  [[nodiscard]] std::optional<std::span<const std::byte>> next();
  // Offset of the next chunk; the offset of the current payload is
  // payload_offset().
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  [[nodiscard]] std::uint64_t payload_offset() const noexcept { return payload_offset_; }
  [[nodiscard]] bool at_end() const noexcept { return offset_ >= bytes_.size(); }

 private:
  std::span<const std::byte> bytes_;
  std::uint64_t offset_ = 0;
  std::uint64_t payload_offset_ = 0;
};

// Decodes a single-buffer stream one tensor at a time: what decode_buffer
// does, without holding the tensors (long .ten files, salvage). No limit on
// the tensor count: the caller decides what to keep.
class TensorDecoder {
 public:
  // bytes must outlive the decoder; owner as for decode_buffer.
  explicit TensorDecoder(std::span<const std::byte> bytes, std::shared_ptr<const void> owner = nullptr,
                         const DecodeLimits& limits = {}) noexcept
      : reader_(bytes), owner_(std::move(owner)), limits_(limits) {}
  // Returns the next tensor, a view into bytes holding owner, or nothing at
  // the end of the input. Throws FormatError as decode_buffer; the decoder
  // then stays before the damaged tensor (offset() is where it starts).
  [[nodiscard]] std::optional<Tensor> next();
  // As next(), but only checks the tensor: returns its header without
  // touching its data payload.
  [[nodiscard]] std::optional<TensorHeader> next_header();
  // Offset of the next tensor's header chunk.
  [[nodiscard]] std::uint64_t offset() const noexcept { return reader_.offset(); }
  // Tensors decoded so far; the index in error messages.
  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  [[nodiscard]] bool at_end() const noexcept { return reader_.at_end(); }

 private:
  struct Chunks {
    std::span<const std::byte> header;
    std::uint64_t header_offset;
    std::span<const std::byte> data;
    std::uint64_t data_offset;
    ChunkReader after;  // the reader past both chunks
  };
  [[nodiscard]] std::optional<Chunks> next_chunks();

  ChunkReader reader_;
  std::shared_ptr<const void> owner_;
  DecodeLimits limits_;
  std::size_t count_ = 0;
};

// Decodes one list from a single buffer (or every tensor of a stream of lists
// back to back, as the reference's load() does): tensors are views into
// bytes, each holding owner (which must keep bytes alive; null if the caller
// does). Throws FormatError, also for an odd number of chunks or more than
// limits.max_tensors tensors.
[[nodiscard]] TensorList decode_buffer(std::span<const std::byte> bytes, std::shared_ptr<const void> owner = nullptr,
                                       const DecodeLimits& limits = {});

// ---- multipart encoding ----

// One received frame and what keeps its bytes alive.
struct FrameView {
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> owner;
};
// Decodes a multipart message: frames alternate header, data.
// Throws FormatError for an odd frame count or a bad header or data frame.
[[nodiscard]] TensorList decode_frames(std::span<const FrameView> frames, const DecodeLimits& limits = {});
// Decodes a message either way: one frame starting with the magic is a single
// buffer, anything else is multipart.
[[nodiscard]] TensorList decode_message(std::span<const FrameView> frames, const DecodeLimits& limits = {});

}  // namespace tensorcom
