#include "tensorcom/metadata.h"

#include <msgpack.hpp>

#include <cstring>

namespace tensorcom {

std::vector<std::byte> encode_metadata(const BatchMetadata& metadata) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_map(4);
  packer.pack(std::string_view("keys"));
  packer.pack(metadata.keys);
  packer.pack(std::string_view("shards"));
  packer.pack(metadata.shards);
  packer.pack(std::string_view("server"));
  packer.pack(metadata.server);
  packer.pack(std::string_view("seq"));
  packer.pack(metadata.sequence);
  auto* begin = reinterpret_cast<const std::byte*>(buffer.data());
  return {begin, begin + buffer.size()};
}

namespace {

// Bounds for hostile input: metadata is a flat map of short lists of strings.
constexpr std::size_t kMaxItems = 1u << 20;
constexpr std::size_t kMaxString = 1u << 16;
constexpr std::size_t kMaxDepth = 3;

const msgpack::unpack_limit kLimits(kMaxItems, 16, kMaxString, kMaxString, kMaxString, kMaxDepth);

std::vector<std::string> as_strings(const msgpack::object& object, const std::string& field) {
  if (object.type != msgpack::type::ARRAY) throw FormatError(FormatErrorKind::kMetadata, "metadata '" + field + "' is not an array", 0);
  std::vector<std::string> out;
  out.reserve(object.via.array.size);
  for (const auto& item : std::span(object.via.array.ptr, object.via.array.size)) {
    if (item.type != msgpack::type::STR) throw FormatError(FormatErrorKind::kMetadata, "metadata '" + field + "' holds a non-string", 0);
    out.emplace_back(item.via.str.ptr, item.via.str.size);
  }
  return out;
}

void read_field(BatchMetadata& out, std::string_view key, const msgpack::object& value) {
  if (key == "keys") {
    out.keys = as_strings(value, "keys");
  } else if (key == "shards") {
    out.shards = as_strings(value, "shards");
  } else if (key == "server") {
    if (value.type != msgpack::type::STR) throw FormatError(FormatErrorKind::kMetadata, "metadata 'server' is not a string", 0);
    out.server.assign(value.via.str.ptr, value.via.str.size);
  } else if (key == "seq") {
    if (value.type != msgpack::type::POSITIVE_INTEGER) throw FormatError(FormatErrorKind::kMetadata, "metadata 'seq' is not an unsigned integer", 0);
    out.sequence = value.via.u64;
  }
}

}  // namespace

BatchMetadata decode_metadata(std::span<const std::byte> bytes) {
  const auto* data = reinterpret_cast<const char*>(bytes.data());
  std::size_t offset = 0;
  msgpack::object_handle handle;
  try {
    handle = msgpack::unpack(data, bytes.size(), offset, nullptr, nullptr, kLimits);
  } catch (const std::exception& e) {
    throw FormatError(FormatErrorKind::kMetadata, std::string("metadata is not valid msgpack: ") + e.what(), offset);
  }
  if (offset != bytes.size()) {
    throw FormatError(FormatErrorKind::kMetadata, "metadata has " + std::to_string(bytes.size() - offset) + " trailing bytes", offset);
  }
  const msgpack::object& root = handle.get();
  if (root.type != msgpack::type::MAP) throw FormatError(FormatErrorKind::kMetadata, "metadata is not a map", 0);
  BatchMetadata out;
  for (const auto& kv : std::span(root.via.map.ptr, root.via.map.size)) {
    if (kv.key.type != msgpack::type::STR) throw FormatError(FormatErrorKind::kMetadata, "metadata has a non-string key", 0);
    read_field(out, std::string_view(kv.key.via.str.ptr, kv.key.via.str.size), kv.val);
  }
  return out;
}

Tensor metadata_tensor(const BatchMetadata& metadata) {
  std::vector<std::byte> bytes = encode_metadata(metadata);
  Tensor t = Tensor::allocate(DType::kUInt8, {static_cast<std::int64_t>(bytes.size())}, kMetadataInfo);
  std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

std::optional<BatchMetadata> find_metadata(std::span<const Tensor> tensors) {
  for (auto it = tensors.rbegin(); it != tensors.rend(); ++it) {
    if (it->info() == kMetadataInfo && it->dtype() == DType::kUInt8) return decode_metadata(it->bytes());
  }
  return std::nullopt;
}

}  // namespace tensorcom
