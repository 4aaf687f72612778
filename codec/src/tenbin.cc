// The tenbin codec. Layout of a header payload (int64 words, little-endian):
//   [0] dtype code, NUL-padded ASCII   [1] info, NUL-padded ASCII
//   [2] ndim                           [3..3+ndim) dimensions
#include "tensorcom/codec/tenbin.h"

#include <bit>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tensorcom {

static_assert(std::endian::native == std::endian::little, "tenbin is little-endian; big-endian hosts need byte swaps");

namespace {

constexpr std::size_t kWord = 8;
constexpr std::size_t kFixedHeaderWords = 3;

std::int64_t load_i64(const std::byte* p) noexcept {
  std::int64_t v;
  std::memcpy(&v, p, kWord);
  return v;
}

void store_i64(std::byte* p, std::int64_t v) noexcept { std::memcpy(p, &v, kWord); }

void store_text_word(std::byte* p, std::string_view text) noexcept {
  std::memset(p, 0, kWord);
  std::memcpy(p, text.data(), text.size());
}

// Printable rendering of untrusted bytes for error messages.
std::string escape(std::span<const std::byte> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::byte b : bytes) {
    auto c = static_cast<unsigned char>(b);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// A NUL-padded text word, with NULs stripped from both ends as the reference
// does. Returns nothing if what remains is not printable ASCII.
std::optional<std::string> read_text_word(const std::byte* p) {
  std::string_view raw(reinterpret_cast<const char*>(p), kWord);
  auto first = raw.find_first_not_of('\0');
  if (first == std::string_view::npos) return std::string();
  auto last = raw.find_last_not_of('\0');
  std::string_view text = raw.substr(first, last - first + 1);
  for (char c : text) {
    if (c <= 0 || c >= 0x7f) return std::nullopt;
  }
  return std::string(text);
}

std::size_t padded(std::size_t n) noexcept { return (n + kChunkPadding - 1) / kChunkPadding * kChunkPadding; }

std::string at_tensor(std::size_t index) { return "tensor " + std::to_string(index) + ": "; }

bool aligned_for(DType dtype, const std::byte* data) noexcept {
  std::size_t alignment = std::clamp<std::size_t>(itemsize(dtype), 1, alignof(std::max_align_t));
  return reinterpret_cast<std::uintptr_t>(data) % alignment == 0;
}

// Pairs header and data payloads into views. `data_owner` keeps data alive.
Tensor make_view(std::size_t index, std::span<const std::byte> header, std::uint64_t header_offset,
                 std::span<const std::byte> data, std::uint64_t data_offset, std::shared_ptr<const void> data_owner,
                 const DecodeLimits& limits) {
  TensorHeader h = decode_tensor_header(index, header, header_offset, data.size(), data_offset, limits);
  // ZeroMQ hands over small messages as slices of its receive buffer at any
  // byte offset; typed access to a float or int tensor there would be
  // misaligned, so such (small) payloads are copied into aligned memory.
  if (!aligned_for(h.dtype, data.data())) {
    Tensor copy = Tensor::allocate(h.dtype, std::move(h.shape), h.info);
    if (copy.nbytes() != 0) std::memcpy(copy.data(), data.data(), copy.nbytes());
    return copy;
  }
  // The tensor aliases the input; its writability is the owner's business.
  auto* ptr = const_cast<std::byte*>(data.data());
  return Tensor::view(h.dtype, std::move(h.shape), ptr, std::move(data_owner), h.info);
}

void check_frame_count(std::size_t frames, const DecodeLimits& limits) {
  if (frames % 2 != 0) {
    throw FormatError(FormatErrorKind::kOddFrameCount,
                      "odd frame count " + std::to_string(frames) + ": each tensor is a header and a data frame", 0);
  }
  if (frames / 2 > limits.max_tensors) {
    throw FormatError(FormatErrorKind::kTooManyTensors,
                      std::to_string(frames / 2) + " tensors exceed the limit of " + std::to_string(limits.max_tensors),
                      0);
  }
}

}  // namespace

// ---- headers ----

std::size_t header_size(const Tensor& tensor) noexcept { return kWord * (kFixedHeaderWords + tensor.ndim()); }

void write_header(const Tensor& tensor, std::span<std::byte> out) {
  if (tensor.ndim() > kMaxNdim) {
    throw ArgumentError("cannot encode a tensor of ndim " + std::to_string(tensor.ndim()) + " (at most " +
                        std::to_string(kMaxNdim) + ")");
  }
  if (out.size() < header_size(tensor)) throw ArgumentError("write_header: output buffer too small");
  std::byte* p = out.data();
  store_text_word(p, dtype_code(tensor.dtype()));
  store_text_word(p + kWord, tensor.info());
  store_i64(p + 2 * kWord, static_cast<std::int64_t>(tensor.ndim()));
  for (std::size_t i = 0; i < tensor.ndim(); ++i) store_i64(p + (3 + i) * kWord, tensor.shape()[i]);
}

TensorHeader decode_header(std::span<const std::byte> header, std::uint64_t base_offset, const DecodeLimits& limits) {
  if (header.size() < kFixedHeaderWords * kWord) {
    throw FormatError(FormatErrorKind::kBadHeader,
                      "header is " + std::to_string(header.size()) + " bytes, need at least 24", base_offset);
  }
  TensorHeader h;
  auto code = read_text_word(header.data());
  auto dtype = code ? dtype_from_code(*code) : std::nullopt;
  if (!dtype) {
    throw FormatError(FormatErrorKind::kBadHeader, "unknown dtype code '" + escape(header.first(kWord)) + "'",
                      base_offset);
  }
  h.dtype = *dtype;
  auto info = read_text_word(header.data() + kWord);
  if (!info)
    throw FormatError(FormatErrorKind::kBadHeader,
                      "info field '" + escape(header.subspan(kWord, kWord)) + "' is not ASCII", base_offset + kWord);
  h.info = std::move(*info);
  std::int64_t ndim = load_i64(header.data() + 2 * kWord);
  if (ndim < 0 || static_cast<std::uint64_t>(ndim) > limits.max_ndim) {
    throw FormatError(FormatErrorKind::kBadHeader,
                      "ndim " + std::to_string(ndim) + " outside 0.." + std::to_string(limits.max_ndim),
                      base_offset + 2 * kWord);
  }
  std::size_t needed = kWord * (kFixedHeaderWords + static_cast<std::size_t>(ndim));
  if (header.size() < needed) {
    throw FormatError(FormatErrorKind::kBadHeader,
                      "header is " + std::to_string(header.size()) + " bytes, ndim " + std::to_string(ndim) +
                          " needs " + std::to_string(needed),
                      base_offset);
  }
  h.shape.resize(static_cast<std::size_t>(ndim));
  for (std::size_t i = 0; i < h.shape.size(); ++i) {
    h.shape[i] = load_i64(header.data() + (3 + i) * kWord);
    if (h.shape[i] < 0) {
      throw FormatError(FormatErrorKind::kBadHeader,
                        "dimension " + std::to_string(i) + " is negative (" + std::to_string(h.shape[i]) + ")",
                        base_offset + (3 + i) * kWord);
    }
  }
  // The extent counts zero dimensions as one: an empty tensor of shape
  // (0, 2**62) holds no bytes, but its strides overflow, and numpy refuses it.
  std::uint64_t extent = itemsize(h.dtype);
  bool empty = false;
  for (std::int64_t dim : h.shape) {
    empty = empty || dim == 0;
    if (__builtin_mul_overflow(extent, static_cast<std::uint64_t>(std::max<std::int64_t>(dim, 1)), &extent) ||
        extent > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw FormatError(
          FormatErrorKind::kBadHeader,
          "shape " + format_shape(h.shape) + " of " + std::string(dtype_name(h.dtype)) + " overflows 64 bits",
          base_offset + 3 * kWord);
    }
  }
  h.data_size = empty ? 0 : static_cast<std::size_t>(extent);
  return h;
}

// ---- single buffer ----

TensorHeader decode_tensor_header(std::size_t index, std::span<const std::byte> header, std::uint64_t header_offset,
                                  std::size_t data_size, std::uint64_t data_offset, const DecodeLimits& limits) {
  TensorHeader h;
  try {
    h = decode_header(header, header_offset, limits);
  } catch (const FormatError& e) {
    throw e.with_context(at_tensor(index));
  }
  if (data_size < h.data_size) {
    throw FormatError(FormatErrorKind::kDataPayload,
                      at_tensor(index) + "data payload is " + std::to_string(data_size) + " bytes, shape " +
                          format_shape(h.shape) + " of " + std::string(dtype_name(h.dtype)) + " needs " +
                          std::to_string(h.data_size),
                      data_offset);
  }
  return h;
}

std::size_t chunk_size(std::size_t payload_size) noexcept { return kChunkPrefixSize + padded(payload_size); }

std::size_t encoded_size(std::span<const Tensor> tensors) {
  std::size_t total = 0;
  for (const Tensor& t : tensors) total += chunk_size(header_size(t)) + chunk_size(t.nbytes());
  return total;
}

namespace {

// Writes magic and length; returns where the payload goes.
std::byte* begin_chunk(std::byte* out, std::size_t payload_size) noexcept {
  std::memcpy(out, kTenbinMagic.data(), kTenbinMagic.size());
  store_i64(out + kTenbinMagic.size(), static_cast<std::int64_t>(payload_size));
  return out + kChunkPrefixSize;
}

// Zeroes the padding after a payload; returns where the next chunk goes.
std::byte* end_chunk(std::byte* payload, std::size_t payload_size) noexcept {
  std::memset(payload + payload_size, 0, padded(payload_size) - payload_size);
  return payload + padded(payload_size);
}

}  // namespace

std::size_t encode_into(std::span<const Tensor> tensors, std::span<std::byte> out) {
  std::size_t size = encoded_size(tensors);
  if (out.size() < size) {
    throw ArgumentError("encode_into: buffer of " + std::to_string(out.size()) + " bytes, need " +
                        std::to_string(size));
  }
  std::byte* p = out.data();
  for (const Tensor& t : tensors) {
    std::size_t hsize = header_size(t);
    std::byte* header = begin_chunk(p, hsize);
    write_header(t, {header, hsize});
    p = end_chunk(header, hsize);
    std::byte* data = begin_chunk(p, t.nbytes());
    if (t.nbytes() != 0) std::memcpy(data, t.data(), t.nbytes());
    p = end_chunk(data, t.nbytes());
  }
  auto written = static_cast<std::size_t>(p - out.data());
  if (written != size) throw Error("encode_into: wrote " + std::to_string(written) + " of " + std::to_string(size));
  return written;
}

SharedBuffer encode_buffer(std::span<const Tensor> tensors) {
  SharedBuffer buffer = SharedBuffer::allocate(encoded_size(tensors));
  encode_into(tensors, buffer.bytes());
  return buffer;
}

bool starts_with_magic(std::span<const std::byte> bytes) noexcept {
  return bytes.size() >= kTenbinMagic.size() &&
         std::memcmp(bytes.data(), kTenbinMagic.data(), kTenbinMagic.size()) == 0;
}

std::size_t chunk_payload_length(std::span<const std::byte> prefix, std::uint64_t remaining, std::uint64_t offset) {
  if (remaining < kChunkPrefixSize || prefix.size() < kChunkPrefixSize) {
    throw FormatError(FormatErrorKind::kChunkPrefix,
                      "chunk prefix cut short: " + std::to_string(remaining) + " bytes left, need 16", offset);
  }
  if (!starts_with_magic(prefix)) {
    throw FormatError(FormatErrorKind::kBadMagic, "bad magic '" + escape(prefix.first(8)) + "', expected '~TenBin~'",
                      offset);
  }
  const std::int64_t length = load_i64(prefix.data() + 8);
  const std::uint64_t available = remaining - kChunkPrefixSize;
  if (length < 0 || static_cast<std::uint64_t>(length) > available) {
    throw FormatError(FormatErrorKind::kChunkLength,
                      "chunk length " + std::to_string(length) + " but " + std::to_string(available) + " bytes remain",
                      offset + 8);
  }
  return static_cast<std::size_t>(length);
}

std::optional<std::span<const std::byte>> ChunkReader::next() {
  if (at_end()) return std::nullopt;
  const std::uint64_t remaining = bytes_.size() - offset_;
  const std::size_t length = chunk_payload_length(
      bytes_.subspan(offset_, std::min<std::uint64_t>(remaining, kChunkPrefixSize)), remaining, offset_);
  payload_offset_ = offset_ + kChunkPrefixSize;
  auto payload = bytes_.subspan(payload_offset_, length);
  // The reference tolerates a stream that ends without the last padding.
  offset_ = std::min<std::uint64_t>(bytes_.size(), payload_offset_ + padded(length));
  return payload;
}

std::optional<TensorDecoder::Chunks> TensorDecoder::next_chunks() {
  ChunkReader reader = reader_;
  auto header = reader.next();
  if (!header) return std::nullopt;
  std::uint64_t header_offset = reader.payload_offset();
  auto data = reader.next();
  if (!data) {
    throw FormatError(FormatErrorKind::kOddChunkCount,
                      "odd chunk count " + std::to_string(2 * count_ + 1) + ": the last header has no data chunk",
                      header_offset);
  }
  // Moves on only once both chunks are whole: after a throw, offset() is
  // where the damaged tensor starts.
  Chunks chunks{*header, header_offset, *data, reader.payload_offset(), reader};
  return chunks;
}

std::optional<Tensor> TensorDecoder::next() {
  auto chunks = next_chunks();
  if (!chunks) return std::nullopt;
  Tensor tensor =
      make_view(count_, chunks->header, chunks->header_offset, chunks->data, chunks->data_offset, owner_, limits_);
  reader_ = chunks->after;
  ++count_;
  return tensor;
}

std::optional<TensorHeader> TensorDecoder::next_header() {
  auto chunks = next_chunks();
  if (!chunks) return std::nullopt;
  TensorHeader header = decode_tensor_header(count_, chunks->header, chunks->header_offset, chunks->data.size(),
                                             chunks->data_offset, limits_);
  reader_ = chunks->after;
  ++count_;
  return header;
}

TensorList decode_buffer(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                         const DecodeLimits& limits) {
  TensorDecoder decoder(bytes, std::move(owner), limits);
  TensorList tensors;
  while (!decoder.at_end()) {
    if (tensors.size() == limits.max_tensors) {
      throw FormatError(FormatErrorKind::kTooManyTensors,
                        "more than " + std::to_string(limits.max_tensors) + " tensors", decoder.offset());
    }
    auto tensor = decoder.next();
    if (!tensor) break;
    tensors.push_back(std::move(*tensor));
  }
  return tensors;
}

// ---- multipart ----

TensorList decode_frames(std::span<const FrameView> frames, const DecodeLimits& limits) {
  check_frame_count(frames.size(), limits);
  TensorList tensors;
  tensors.reserve(frames.size() / 2);
  std::uint64_t offset = 0;  // offsets count through the concatenated frames
  for (std::size_t i = 0; i < frames.size(); i += 2) {
    const FrameView& header = frames[i];
    const FrameView& data = frames[i + 1];
    std::uint64_t data_offset = offset + header.bytes.size();
    tensors.push_back(make_view(i / 2, header.bytes, offset, data.bytes, data_offset, data.owner, limits));
    offset = data_offset + data.bytes.size();
  }
  return tensors;
}

TensorList decode_message(std::span<const FrameView> frames, const DecodeLimits& limits) {
  if (frames.size() == 1 && starts_with_magic(frames[0].bytes)) {
    return decode_buffer(frames[0].bytes, frames[0].owner, limits);
  }
  return decode_frames(frames, limits);
}

}  // namespace tensorcom
