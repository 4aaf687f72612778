#include "tensorcom/formats/printable.h"

#include <cstdio>

#include "tensorcom/formats/shard_reader.h"

namespace tensorcom::formats {

namespace {

void append_hex(std::string& out, unsigned char byte) {
  char hex[5];
  std::snprintf(hex, sizeof hex, "\\x%02x", byte);
  out += hex;
}

const char* named_escape(char c) noexcept {
  switch (c) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\\': return "\\\\";
    default: return nullptr;
  }
}

// The length of the well-formed UTF-8 sequence text starts with, 0 if it
// starts with none (a stray or overlong byte, a surrogate, past U+10FFFF).
std::size_t utf8_length(std::string_view text) noexcept {
  const auto lead = static_cast<unsigned char>(text[0]);
  std::size_t length = 0;
  char32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[i]);
    if ((next & 0xC0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3F);
  }
  const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
  if (overlong || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return 0;
  return length;
}

// C1 controls (U+0080..U+009F) are terminal escapes too: CSI is U+009B.
bool is_c1_control(std::string_view sequence) noexcept {
  return sequence.size() == 2 && static_cast<unsigned char>(sequence[0]) == 0xC2 &&
         static_cast<unsigned char>(sequence[1]) < 0xA0;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  const bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    if (const char* escape = named_escape(c)) {
      out += escape;
      ++i;
      continue;
    }
    if (byte < 0x80) {
      if (byte < 0x20 || byte == 0x7f) {
        append_hex(out, byte);
      } else {
        out += c;
      }
      ++i;
      continue;
    }
    // Text in UTF-8 stays readable; anything else is shown byte by byte.
    const std::size_t length = utf8_length(text.substr(i));
    if (length == 0 || is_c1_control(text.substr(i, length))) {
      append_hex(out, byte);
      ++i;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  if (cut) out += "...";
  return out;
}

bool is_utf8(std::string_view text) noexcept {
  for (std::size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t length = utf8_length(text.substr(i));
    if (length == 0) return false;
    i += length;
  }
  return true;
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
