#include "resume_token.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "tensorcom/codec/error.h"
#include "tensorcom/codec/regular_file.h"
#include "tensorcom/formats/printable.h"

namespace tensorcom::pipeline {

namespace {

using Json = nlohmann::json;

constexpr std::uint64_t kMaxNumber = 1'000'000'000'000;  // more batches or epochs than any run
constexpr std::size_t kMaxRanges = 100'000;
constexpr std::size_t kMaxStreams = 65'536;
constexpr std::size_t kMaxEpochEntries = 100'000;  // in a whole token, as tensorcom.resume reads it
constexpr std::uint64_t kMaxTokenBytes = std::uint64_t{64} << 20;

class TokenReader {
 public:
  TokenReader(std::string_view source, const StreamIdentity& identity) : source_(source), identity_(identity) {}

  StreamResume read(const Json& token) {
    if (!token.is_object()) fail("the token", "is not a JSON object");
    if (string_field(token, "format", "the token") != "tensorcom-resume") {
      fail("format", "is not \"tensorcom-resume\"");
    }
    if (number(field(token, "version", "the token"), "version") != 1) fail("version", "is not 1 (this server reads 1)");
    // Optional, as tensorcom.resume reads it: where a new stream starts.
    const auto epoch_field = token.find("epoch");
    const std::uint64_t epoch = epoch_field == token.end() ? 0 : number(*epoch_field, "epoch");
    const Json& streams = field(token, "streams", "the token");
    if (!streams.is_object()) fail("streams", "is not an object");
    if (streams.size() > kMaxStreams) fail("streams", "names more than " + std::to_string(kMaxStreams) + " streams");
    Budget budget;
    std::optional<StreamResume> mine;
    for (const auto& [name, entry] : streams.items()) {
      StreamResume parsed = read_stream(name, entry, budget);
      if (name == identity_.stream) mine = std::move(parsed);
    }
    if (mine) return *mine;
    StreamResume fresh;
    fresh.first_epoch = epoch;
    fresh.stream_found = false;
    return fresh;
  }

 private:
  // What a whole token may hold: it is read into memory whole.
  struct Budget {
    std::size_t ranges = 0;
    std::size_t epochs = 0;
  };

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    // Names from the token (a stream's) may hold control bytes: escaped.
    throw ArgumentError(formats::printable(source_) + ": '" + formats::printable(field) + "' " + what);
  }

  const Json& field(const Json& object, const char* name, const std::string& where) const {
    auto it = object.find(name);
    if (it == object.end()) fail(name, "is missing from " + where);
    return *it;
  }

  std::string string_field(const Json& object, const char* name, const std::string& where) const {
    const Json& value = field(object, name, where);
    if (!value.is_string()) fail(name, "is not a string");
    return value.get<std::string>();
  }

  std::uint64_t number(const Json& value, const std::string& name) const {
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0)) {
      fail(name, "is not a whole number >= 0");
    }
    const auto n = value.get<std::uint64_t>();
    if (n > kMaxNumber) fail(name, "is " + std::to_string(n) + ", over " + std::to_string(kMaxNumber));
    return n;
  }

  // Any uint64: the servers' --seed is one.
  std::uint64_t seed_number(const Json& value, const std::string& name) const {
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0)) {
      fail(name, "is not a whole number 0..2^64-1");
    }
    return value.get<std::uint64_t>();
  }

  StreamResume read_stream(const std::string& name, const Json& entry, Budget& budget) const {
    const std::string where = "streams." + name;
    if (!entry.is_object()) fail(where, "is not an object");
    const std::string fingerprint = string_field(entry, "fingerprint", where);
    const bool hex16 = fingerprint.size() == 16 && std::all_of(fingerprint.begin(), fingerprint.end(), [](char c) {
                         return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
                       });
    if (!hex16) fail(where + ".fingerprint", "is not 16 hex digits");
    const std::uint64_t seed = seed_number(field(entry, "seed", where), where + ".seed");
    StreamResume out;
    out.seed = seed;
    out.first_epoch = number(field(entry, "complete", where), where + ".complete");
    const Json& epochs = field(entry, "epochs", where);
    if (!epochs.is_object()) fail(where + ".epochs", "is not an object");
    const bool mine = name == identity_.stream;
    if (mine && !identity_.seed_from_token) check_identity(where, fingerprint, seed);
    budget.epochs += epochs.size();
    if (budget.epochs > kMaxEpochEntries) {
      fail(where + ".epochs", "makes more than " + std::to_string(kMaxEpochEntries) + " epoch entries in the token");
    }
    for (const auto& [key, value] : epochs.items()) {
      const std::uint64_t epoch = epoch_key(where, key, out.first_epoch);
      out.consumed[epoch] = read_epoch(where + ".epochs." + key, value, budget.ranges);
    }
    return out;
  }

  void check_identity(const std::string& where, const std::string& fingerprint, std::uint64_t seed) const {
    if (seed != identity_.seed) {
      fail(where + ".seed",
           "is " + std::to_string(seed) + "; this server's --seed is " + std::to_string(identity_.seed));
    }
    if (fingerprint != identity_.fingerprint) {
      fail(where + ".fingerprint",
           "is " + fingerprint + "; this server's is " + identity_.fingerprint +
               ": it was started with another shard list, --rank/--world, batch size, --epoch-batches or shuffle");
    }
  }

  std::uint64_t epoch_key(const std::string& where, const std::string& key, std::uint64_t complete) const {
    // Decimal without leading zeros, as tensorcom.resume writes and reads
    // them: "7" and "007" must not both name epoch 7.
    const bool decimal = !key.empty() && key.size() <= 13 && (key.size() == 1 || key[0] != '0') &&
                         std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!decimal) {
      fail(where + ".epochs", "has a key that is not an epoch number without leading zeros: \"" +
                                  formats::printable(key.substr(0, 32)) + "\"");
    }
    const std::uint64_t epoch = std::stoull(key);
    if (epoch < complete) fail(where + ".epochs." + key, "is below 'complete' (" + std::to_string(complete) + ")");
    return epoch;
  }

  BatchRanges read_epoch(const std::string& where, const Json& value, std::size_t& ranges) const {
    if (!value.is_object()) fail(where, "is not an object");
    std::optional<std::uint64_t> batches;
    if (auto it = value.find("batches"); it != value.end() && !it->is_null()) {
      batches = number(*it, where + ".batches");
      if (*batches == 0) fail(where + ".batches", "is 0: an epoch has at least one batch");
      if (identity_.epoch_batches && *batches != identity_.epoch_batches) {
        fail(where + ".batches", "is " + std::to_string(*batches) + "; this server's --epoch-batches is " +
                                     std::to_string(identity_.epoch_batches));
      }
    }
    const Json& consumed = field(value, "consumed", where);
    if (!consumed.is_array()) fail(where + ".consumed", "is not an array");
    BatchRanges out;
    for (const Json& range : consumed) {
      if (++ranges > kMaxRanges) fail(where + ".consumed", "makes more than " + std::to_string(kMaxRanges) + " ranges");
      if (!range.is_array() || range.size() != 2) fail(where + ".consumed", "holds something other than [first, end]");
      const std::uint64_t first = number(range[0], where + ".consumed");
      const std::uint64_t end = number(range[1], where + ".consumed");
      if (first >= end) fail(where + ".consumed", "holds an empty or reversed range");
      if (!out.empty() && first < out.back().second) fail(where + ".consumed", "is not sorted and disjoint");
      if (batches && end > *batches) {
        fail(where + ".consumed",
             "reaches batch " + std::to_string(end - 1) + " of an epoch of " + std::to_string(*batches));
      }
      if (!out.empty() && first == out.back().second) {
        out.back().second = end;  // adjacent: joined, as tensorcom.resume records them
      } else {
        out.emplace_back(first, end);
      }
    }
    return out;
  }

  std::string_view source_;
  const StreamIdentity& identity_;
};

}  // namespace

bool StreamResume::consumed_batch(std::uint64_t epoch, std::uint64_t batch) const {
  if (epoch < first_epoch) return true;
  auto it = consumed.find(epoch);
  if (it == consumed.end()) return false;
  const BatchRanges& ranges = it->second;
  auto after = std::upper_bound(ranges.begin(), ranges.end(), batch,
                                [](std::uint64_t b, const auto& range) { return b < range.first; });
  return after != ranges.begin() && batch < std::prev(after)->second;
}

std::uint64_t StreamResume::consumed_batches(std::uint64_t epoch) const {
  auto it = consumed.find(epoch);
  if (it == consumed.end()) return 0;
  std::uint64_t n = 0;
  for (const auto& [first, end] : it->second) n += end - first;
  return n;
}

std::uint64_t fnv1a(std::string_view bytes, std::uint64_t hash) noexcept {
  for (char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

std::string stream_fingerprint(const StreamRecipe& r) {
  std::uint64_t hash = kFnvOffset;
  auto add_bytes = [&](const void* data, std::size_t size) {
    hash = fnv1a(std::string_view(static_cast<const char*>(data), size), hash);
  };
  auto add_number = [&](std::uint64_t n) { add_bytes(&n, sizeof n); };
  for (std::uint64_t n :
       {r.seed, r.rank, r.world, r.batch_size, r.epoch_batches, r.shuffle_buffer, std::uint64_t{r.shuffle_units},
        std::uint64_t{r.with_replacement}, std::uint64_t{r.units.size()}}) {
    add_number(n);
  }
  if (r.repeats > 1) add_number(r.repeats);
  for (const std::string& unit : r.units) {
    add_number(unit.size());
    add_bytes(unit.data(), unit.size());
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

StreamResume parse_resume_token(std::string_view text, std::string_view source, const StreamIdentity& identity) {
  // A token nests five deep ({streams: {name: {epochs: {e: {consumed: [[a, b]]}}}}}).
  // Deeper is refused as it is read: 64 MiB of '[' would otherwise become
  // tens of millions of nested values, gigabytes, before any check.
  constexpr int kMostDepth = 16;
  const auto refuse_deep = [&](int depth, Json::parse_event_t event, Json&) {
    if (depth > kMostDepth &&
        (event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start)) {
      throw ArgumentError(std::string(source) + ": not a resume token: nested more than " + std::to_string(kMostDepth) +
                          " deep");
    }
    return true;
  };
  Json token;
  try {
    token = Json::parse(text, refuse_deep);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number like 8e8333333
    throw ArgumentError(std::string(source) + ": not a JSON resume token (" + e.what() + ")");
  }
  return TokenReader(source, identity).read(token);
}

StreamResume read_resume_token(const std::string& path, const StreamIdentity& identity) {
  return parse_resume_token(read_regular_file(path, kMaxTokenBytes, "resume token"), path, identity);
}

}  // namespace tensorcom::pipeline
