#include "tensorcom/codec/metadata.h"

#include <msgpack.hpp>

#include <algorithm>
#include <climits>
#include <cstring>

namespace tensorcom {

namespace {

void pack_geometry(msgpack::packer<msgpack::sbuffer>& packer, const std::vector<SampleGeometry>& geometry) {
  const auto n = static_cast<std::uint32_t>(geometry.size());
  packer.pack(std::string_view("crops"));
  packer.pack_array(n);
  for (const SampleGeometry& g : geometry) {
    packer.pack_array(4);
    packer.pack(g.x).pack(g.y).pack(g.width).pack(g.height);
  }
  packer.pack(std::string_view("flips"));
  packer.pack_array(n);
  for (const SampleGeometry& g : geometry) packer.pack(g.flip);
  packer.pack(std::string_view("sizes"));
  packer.pack_array(n);
  for (const SampleGeometry& g : geometry) {
    packer.pack_array(2);
    packer.pack(g.source_width).pack(g.source_height);
  }
}

bool any_erased(const std::vector<SampleGeometry>& geometry) {
  return std::any_of(geometry.begin(), geometry.end(), [](const SampleGeometry& g) { return g.erase.has_value(); });
}

void pack_erase(msgpack::packer<msgpack::sbuffer>& packer, const std::vector<SampleGeometry>& geometry) {
  packer.pack(std::string_view("erase"));
  packer.pack_array(static_cast<std::uint32_t>(geometry.size()));
  for (const SampleGeometry& g : geometry) {
    if (!g.erase) {
      packer.pack_array(0);
      continue;
    }
    packer.pack_array(4);
    for (std::int32_t v : *g.erase) packer.pack(v);
  }
}

bool any_ops(const std::vector<SampleGeometry>& geometry) {
  return std::any_of(geometry.begin(), geometry.end(), [](const SampleGeometry& g) { return !g.ops.empty(); });
}

// Per sample one flat array, name and magnitude after name and magnitude:
// the metadata stays three levels deep.
void pack_ops(msgpack::packer<msgpack::sbuffer>& packer, const std::vector<SampleGeometry>& geometry) {
  packer.pack(std::string_view("ops"));
  packer.pack_array(static_cast<std::uint32_t>(geometry.size()));
  for (const SampleGeometry& g : geometry) {
    packer.pack_array(static_cast<std::uint32_t>(2 * g.ops.size()));
    for (const SampleOp& op : g.ops) packer.pack(op.name).pack(op.magnitude);
  }
}

}  // namespace

std::vector<std::byte> encode_metadata(const BatchMetadata& metadata) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  const bool geometry = !metadata.geometry.empty();
  const bool ops = geometry && any_ops(metadata.geometry);
  const bool erase = geometry && any_erased(metadata.geometry);
  const auto& place = metadata.place;
  const std::uint32_t place_fields = place ? 5 + (place->batches ? 1 : 0) : 0;
  const auto& receipt = metadata.receipt;
  const std::uint32_t receipt_fields = receipt ? 2 + (receipt->key.empty() ? 0 : 1) : 0;
  const std::uint32_t fields = 4 + (geometry ? 3 : 0) + (ops ? 1 : 0) + (erase ? 1 : 0) + (metadata.epoch ? 1 : 0) +
                               (metadata.size ? 1 : 0) + place_fields + receipt_fields +
                               (metadata.recipe.empty() ? 0 : 1);
  packer.pack_map(fields);
  packer.pack(std::string_view("keys"));
  packer.pack(metadata.keys);
  packer.pack(std::string_view("shards"));
  packer.pack(metadata.shards);
  packer.pack(std::string_view("server"));
  packer.pack(metadata.server);
  packer.pack(std::string_view("seq"));
  packer.pack(metadata.sequence);
  if (geometry) pack_geometry(packer, metadata.geometry);
  if (ops) pack_ops(packer, metadata.geometry);
  if (erase) pack_erase(packer, metadata.geometry);
  if (metadata.epoch) packer.pack(std::string_view("epoch")).pack(*metadata.epoch);
  if (metadata.size) packer.pack(std::string_view("size")).pack(*metadata.size);
  if (place) {
    packer.pack(std::string_view("stream")).pack(place->stream);
    packer.pack(std::string_view("fingerprint")).pack(place->fingerprint);
    packer.pack(std::string_view("seed")).pack(place->seed);
    packer.pack(std::string_view("batch")).pack(place->batch);
    if (place->batches) packer.pack(std::string_view("batches")).pack(*place->batches);
    packer.pack(std::string_view("last")).pack(place->last);
  }
  if (!metadata.recipe.empty()) packer.pack(std::string_view("recipe")).pack(metadata.recipe);
  if (receipt) {
    packer.pack(std::string_view("ack")).pack(receipt->to);
    packer.pack(std::string_view("run")).pack(receipt->run);
    if (!receipt->key.empty()) packer.pack(std::string_view("ackkey")).pack(receipt->key);
  }
  auto* begin = reinterpret_cast<const std::byte*>(buffer.data());
  return {begin, begin + buffer.size()};
}

namespace {

// Bounds for hostile input: metadata is a flat map (at most kMaxFields
// keys: the 21 written today, room for more) of short lists of strings.
constexpr std::size_t kMaxItems = 1u << 20;
constexpr std::size_t kMaxFields = 32;
constexpr std::size_t kMaxString = 1u << 16;
constexpr std::size_t kMaxDepth = 3;

const msgpack::unpack_limit kLimits(kMaxItems, kMaxFields, kMaxString, kMaxString, kMaxString, kMaxDepth);

std::vector<std::string> as_strings(const msgpack::object& object, const std::string& field) {
  if (object.type != msgpack::type::ARRAY)
    throw FormatError(FormatErrorKind::kMetadata, "metadata '" + field + "' is not an array", 0);
  std::vector<std::string> out;
  out.reserve(object.via.array.size);
  for (const auto& item : std::span(object.via.array.ptr, object.via.array.size)) {
    if (item.type != msgpack::type::STR)
      throw FormatError(FormatErrorKind::kMetadata, "metadata '" + field + "' holds a non-string", 0);
    out.emplace_back(item.via.str.ptr, item.via.str.size);
  }
  return out;
}

[[noreturn]] void bad_geometry(const std::string& field, const std::string& what) {
  throw FormatError(FormatErrorKind::kMetadata, "metadata '" + field + "' " + what, 0);
}

std::int32_t as_int32(const msgpack::object& item, const std::string& field) {
  if (item.type == msgpack::type::POSITIVE_INTEGER && item.via.u64 <= INT32_MAX)
    return static_cast<std::int32_t>(item.via.u64);
  if (item.type == msgpack::type::NEGATIVE_INTEGER && item.via.i64 >= INT32_MIN)
    return static_cast<std::int32_t>(item.via.i64);
  bad_geometry(field, "holds something other than a 32-bit integer");
}

std::span<const msgpack::object> as_array(const msgpack::object& object, const std::string& field) {
  if (object.type != msgpack::type::ARRAY) bad_geometry(field, "is not an array");
  return {object.via.array.ptr, object.via.array.size};
}

// Fills `count` ints of every sample from "crops" or "sizes" (arrays of arrays).
template <class Assign>
void read_tuples(std::vector<SampleGeometry>& geometry, const msgpack::object& value, const std::string& field,
                 std::size_t count, Assign assign) {
  const auto items = as_array(value, field);
  if (geometry.empty()) geometry.resize(items.size());
  if (geometry.size() != items.size()) bad_geometry(field, "has a different length from another geometry field");
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto tuple = as_array(items[i], field);
    if (tuple.size() != count) bad_geometry(field, "holds an item of " + std::to_string(tuple.size()) + " values");
    for (std::size_t j = 0; j < count; ++j) assign(geometry[i], j, as_int32(tuple[j], field));
  }
}

void read_flips(std::vector<SampleGeometry>& geometry, const msgpack::object& value) {
  const auto items = as_array(value, "flips");
  if (geometry.empty()) geometry.resize(items.size());
  if (geometry.size() != items.size()) bad_geometry("flips", "has a different length from another geometry field");
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].type != msgpack::type::BOOLEAN) bad_geometry("flips", "holds a non-boolean");
    geometry[i].flip = items[i].via.boolean;
  }
}

double as_magnitude(const msgpack::object& item) {
  switch (item.type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return item.via.f64;
    case msgpack::type::POSITIVE_INTEGER: return static_cast<double>(item.via.u64);
    case msgpack::type::NEGATIVE_INTEGER: return static_cast<double>(item.via.i64);
    default: bad_geometry("ops", "holds a magnitude that is not a number");
  }
}

void read_ops(std::vector<SampleGeometry>& geometry, const msgpack::object& value) {
  const auto items = as_array(value, "ops");
  if (geometry.empty()) geometry.resize(items.size());
  if (geometry.size() != items.size()) bad_geometry("ops", "has a different length from another geometry field");
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto flat = as_array(items[i], "ops");
    if (flat.size() % 2 != 0) bad_geometry("ops", "holds a name without its magnitude");
    geometry[i].ops.clear();
    for (std::size_t j = 0; j < flat.size(); j += 2) {
      if (flat[j].type != msgpack::type::STR) bad_geometry("ops", "holds an operation name that is not a string");
      geometry[i].ops.push_back({std::string(flat[j].via.str.ptr, flat[j].via.str.size), as_magnitude(flat[j + 1])});
    }
  }
}

void read_erase(std::vector<SampleGeometry>& geometry, const msgpack::object& value) {
  const auto items = as_array(value, "erase");
  if (geometry.empty()) geometry.resize(items.size());
  if (geometry.size() != items.size()) bad_geometry("erase", "has a different length from another geometry field");
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto box = as_array(items[i], "erase");
    if (box.empty()) {
      geometry[i].erase.reset();
      continue;
    }
    if (box.size() != 4) bad_geometry("erase", "holds a box of " + std::to_string(box.size()) + " values");
    std::array<std::int32_t, 4> values{};
    for (std::size_t j = 0; j < 4; ++j) values[j] = as_int32(box[j], "erase");
    geometry[i].erase = values;
  }
}

std::uint64_t as_unsigned(const msgpack::object& value, const char* field) {
  if (value.type != msgpack::type::POSITIVE_INTEGER) {
    throw FormatError(FormatErrorKind::kMetadata, std::string("metadata '") + field + "' is not an unsigned integer",
                      0);
  }
  return value.via.u64;
}

std::string as_string(const msgpack::object& value, const char* field) {
  if (value.type != msgpack::type::STR) {
    throw FormatError(FormatErrorKind::kMetadata, std::string("metadata '") + field + "' is not a string", 0);
  }
  return {value.via.str.ptr, value.via.str.size};
}

// The stream fields; false if `key` is not one of them.
bool read_place_field(BatchMetadata& out, std::string_view key, const msgpack::object& value) {
  static constexpr std::string_view kFields[] = {"stream", "fingerprint", "seed", "batch", "batches", "last"};
  if (std::find(std::begin(kFields), std::end(kFields), key) == std::end(kFields)) return false;
  auto& place = out.place ? *out.place : out.place.emplace();
  if (key == "stream") {
    place.stream = as_string(value, "stream");
  } else if (key == "fingerprint") {
    place.fingerprint = as_string(value, "fingerprint");
  } else if (key == "seed") {
    place.seed = as_unsigned(value, "seed");
  } else if (key == "batch") {
    place.batch = as_unsigned(value, "batch");
  } else if (key == "batches") {
    place.batches = as_unsigned(value, "batches");
  } else if (value.type != msgpack::type::BOOLEAN) {
    throw FormatError(FormatErrorKind::kMetadata, "metadata 'last' is not a boolean", 0);
  } else {
    place.last = value.via.boolean;
  }
  return true;
}

// The receipt fields; false if `key` is not one of them.
bool read_receipt_field(BatchMetadata& out, std::string_view key, const msgpack::object& value) {
  if (key != "ack" && key != "run" && key != "ackkey") return false;
  auto& receipt = out.receipt ? *out.receipt : out.receipt.emplace();
  if (key == "ack") {
    receipt.to = as_strings(value, "ack");
  } else if (key == "run") {
    receipt.run = as_unsigned(value, "run");
  } else {
    receipt.key = as_string(value, "ackkey");
  }
  return true;
}

void read_field(BatchMetadata& out, std::string_view key, const msgpack::object& value) {
  if (read_place_field(out, key, value) || read_receipt_field(out, key, value)) return;
  if (key == "keys") {
    out.keys = as_strings(value, "keys");
  } else if (key == "shards") {
    out.shards = as_strings(value, "shards");
  } else if (key == "server") {
    out.server = as_string(value, "server");
  } else if (key == "seq") {
    out.sequence = as_unsigned(value, "seq");
  } else if (key == "epoch") {
    out.epoch = as_unsigned(value, "epoch");
  } else if (key == "size") {
    const std::uint64_t size = as_unsigned(value, "size");
    if (size > UINT32_MAX) throw FormatError(FormatErrorKind::kMetadata, "metadata 'size' is too large", 0);
    out.size = static_cast<std::uint32_t>(size);
  } else if (key == "crops") {
    read_tuples(out.geometry, value, "crops", 4, [](SampleGeometry& g, std::size_t j, std::int32_t v) {
      (j == 0 ? g.x : j == 1 ? g.y : j == 2 ? g.width : g.height) = v;
    });
  } else if (key == "sizes") {
    read_tuples(out.geometry, value, "sizes", 2, [](SampleGeometry& g, std::size_t j, std::int32_t v) {
      (j == 0 ? g.source_width : g.source_height) = v;
    });
  } else if (key == "flips") {
    read_flips(out.geometry, value);
  } else if (key == "ops") {
    read_ops(out.geometry, value);
  } else if (key == "erase") {
    read_erase(out.geometry, value);
  } else if (key == "recipe") {
    out.recipe = as_strings(value, "recipe");
    if (out.recipe.size() % 2 != 0) {
      throw FormatError(FormatErrorKind::kMetadata, "metadata 'recipe' is not flag, value pairs", 0);
    }
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
    throw FormatError(FormatErrorKind::kMetadata,
                      "metadata has " + std::to_string(bytes.size() - offset) + " trailing bytes", offset);
  }
  const msgpack::object& root = handle.get();
  if (root.type != msgpack::type::MAP) throw FormatError(FormatErrorKind::kMetadata, "metadata is not a map", 0);
  BatchMetadata out;
  for (const auto& kv : std::span(root.via.map.ptr, root.via.map.size)) {
    if (kv.key.type != msgpack::type::STR)
      throw FormatError(FormatErrorKind::kMetadata, "metadata has a non-string key", 0);
    read_field(out, std::string_view(kv.key.via.str.ptr, kv.key.via.str.size), kv.val);
  }
  if (!out.geometry.empty() && out.geometry.size() != out.keys.size()) {
    throw FormatError(FormatErrorKind::kMetadata,
                      "metadata has geometry for " + std::to_string(out.geometry.size()) + " samples and " +
                          std::to_string(out.keys.size()) + " keys",
                      0);
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
