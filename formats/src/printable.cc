#include "tensorcom/formats/printable.h"

#include <cstdio>

#include "tensorcom/formats/shard_reader.h"

namespace tensorcom::formats {

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  const bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\\': out += "\\\\"; continue;
      default: break;
    }
    if (byte < 0x20 || byte == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      out += hex;
    } else {
      out += c;
    }
  }
  if (cut) out += "...";
  return out;
}

std::string redacted_url(std::string_view url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  const std::size_t authority = scheme + 3;
  std::string_view rest = url.substr(authority);
  const std::size_t query = rest.find_first_of("?#");
  if (query != std::string_view::npos) rest = rest.substr(0, query);
  // The user and password end at the authority's last '@'; the authority
  // ends at the first '/' (as curl parses it).
  const std::size_t at = rest.substr(0, rest.find('/')).rfind('@');
  if (at != std::string_view::npos) rest.remove_prefix(at + 1);
  std::string out(url.substr(0, authority));
  out += rest;
  if (query != std::string_view::npos) out += "?...";
  return out;
}

std::string public_shard_name(std::string_view shard, std::size_t unit) {
  constexpr std::string_view kPipe = "pipe:";
  if (is_http_shard(shard)) return redacted_url(shard);
  if (!shard.starts_with(kPipe)) return std::string(shard);
  std::string_view best;
  std::size_t at = kPipe.size();
  while (at < shard.size()) {
    const std::size_t end = std::min(shard.find_first_of(" \t'\"", at), shard.size());
    std::string_view word = shard.substr(at, end - at);
    word = word.substr(0, std::min(word.find('?'), word.size()));
    if (word.find(".tar") != std::string_view::npos || word.ends_with(".tgz")) best = word;
    at = end + 1;
  }
  const std::size_t slash = best.rfind('/');
  if (slash != std::string_view::npos) best.remove_prefix(slash + 1);
  if (best.empty()) return "pipe-shard-" + std::to_string(unit);
  return std::string(best);
}

}  // namespace tensorcom::formats
