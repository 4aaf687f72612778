// URL parsing splits the way Python's urlsplit does (netloc up to the first
// '/', then '?query' and '#fragment'), because the address the reference
// hands to ZeroMQ is built from those pieces. Checks that ZeroMQ would only
// report later, with less context, are made here with the URL in the message.
#include "tensorcom/transport/url.h"

#include <algorithm>
#include <array>
#include <string>

#include "tensorcom/transport/brace.h"
#include "tensorcom/codec/error.h"

namespace tensorcom {
namespace {

constexpr auto npos = std::string_view::npos;

struct Scheme {
  std::string_view name;
  SocketKind kind;
  bool bind;
};

// zcom.py's `schemes` table, in its order (the error message lists it).
constexpr std::array<Scheme, 8> kSchemes{{
    {"zpush", SocketKind::kPush, false},
    {"zpull", SocketKind::kPull, true},
    {"zpub", SocketKind::kPub, true},
    {"zsub", SocketKind::kSub, false},
    {"zrpush", SocketKind::kPush, true},
    {"zrpull", SocketKind::kPull, false},
    {"zrpub", SocketKind::kPub, false},
    {"zrsub", SocketKind::kSub, true},
}};

enum class Transport { kTcp, kIpc, kInproc };

// The pieces of "scheme://netloc/path?query#fragment"; views into the URL.
struct UrlParts {
  std::string scheme;  // lowercased, as urlsplit does
  std::string_view netloc;
  std::string_view path;
  bool has_fragment = false;
  std::string_view fragment;
};

std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

[[noreturn]] void fail(std::string_view url, const std::string& why) {
  throw UrlError("bad URL " + quote(url) + ": " + why);
}

UrlParts split_url(std::string_view url) {
  const auto colon = url.find("://");
  if (colon == npos) fail(url, "missing '://' (expected scheme://address)");
  UrlParts parts;
  parts.scheme = std::string(url.substr(0, colon));
  std::transform(parts.scheme.begin(), parts.scheme.end(), parts.scheme.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  std::string_view rest = url.substr(colon + 3);
  if (const auto hash = rest.find('#'); hash != npos) {
    parts.has_fragment = true;
    parts.fragment = rest.substr(hash + 1);
    rest = rest.substr(0, hash);
  }
  if (const auto query = rest.find('?'); query != npos) {
    fail(url, "unexpected query " + quote(rest.substr(query)) + " (tensorcom URLs take none)");
  }
  const auto slash = rest.find('/');
  parts.netloc = rest.substr(0, slash);
  parts.path = slash == npos ? std::string_view() : rest.substr(slash);
  return parts;
}

const Scheme& find_scheme(std::string_view url, std::string_view name) {
  for (const auto& scheme : kSchemes) {
    if (scheme.name == name) return scheme;
  }
  std::string known;
  for (const auto& scheme : kSchemes) known += (known.empty() ? "" : ", ") + std::string(scheme.name);
  fail(url, "unknown scheme " + quote(name) + " (expected one of " + known + ")");
}

Transport find_transport(std::string_view url, std::string_view name) {
  if (name == "tcp") return Transport::kTcp;
  if (name == "ipc") return Transport::kIpc;
  if (name == "inproc") return Transport::kInproc;
  fail(url, "unknown transport " + quote(name) + " (expected one of tcp, ipc, inproc)");
}

bool is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// "[addr]" or "[addr%zone]": hex digits, ':' and '.' (IPv4-mapped forms).
bool is_ipv6_literal(std::string_view host) {
  if (host.size() < 4 || host.front() != '[' || host.back() != ']') return false;
  const std::string_view inside = host.substr(1, host.size() - 2);
  const auto percent = inside.find('%');
  const std::string_view addr = inside.substr(0, percent);
  if (addr.find(':') == npos) return false;
  if (!std::all_of(addr.begin(), addr.end(), [](char c) { return is_hex(c) || c == ':' || c == '.'; })) {
    return false;
  }
  if (percent == npos) return true;
  const std::string_view zone = inside.substr(percent + 1);
  return !zone.empty() && std::all_of(zone.begin(), zone.end(), is_alnum);
}

// A DNS name, an IPv4 address or an interface name ("eth0").
bool is_host_name(std::string_view host) {
  return !host.empty() &&
         std::all_of(host.begin(), host.end(), [](char c) { return is_alnum(c) || c == '-' || c == '.' || c == '_'; });
}

// Returns: true for "*" or 0, which ask ZeroMQ for any free port.
bool check_port(std::string_view url, std::string_view port) {
  if (port == "*") return true;
  const std::string why = "bad port " + quote(port) + " (expected a decimal 0..65535 or '*')";
  if (port.empty() || port.size() > 5) fail(url, why);
  int value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') fail(url, why);
    value = value * 10 + (c - '0');
  }
  if (value > 65535) fail(url, why);
  return value == 0;
}

// Returns: "tcp://" + netloc after checking host, port and path.
std::string tcp_address(std::string_view url, const UrlParts& parts, bool bind) {
  if (!parts.path.empty() && parts.path != "/") {
    fail(url, "unexpected path " + quote(parts.path) + " (tcp URLs are scheme://host:port)");
  }
  const std::string_view netloc = parts.netloc;
  // The port follows the last ':' outside an IPv6 literal's brackets.
  const auto bracket = netloc.rfind(']');
  const auto colon = netloc.rfind(':');
  if (colon == npos || (bracket != npos && colon < bracket)) {
    fail(url, "missing port in " + quote(netloc) + " (expected host:port)");
  }
  const std::string_view host = netloc.substr(0, colon);
  const std::string_view port = netloc.substr(colon + 1);
  if (host.empty()) fail(url, "missing host (expected host:port)");
  if (host != "*" && !is_host_name(host) && !is_ipv6_literal(host)) {
    fail(url, "bad host " + quote(host) + " (expected a name, an IPv4 address, [IPv6] or '*')");
  }
  if (host == "*" && !bind) fail(url, "host '*' (every interface) needs a binding URL");
  if (port.empty()) fail(url, "missing port (expected host:port)");
  if (check_port(url, port) && !bind) {
    fail(url, "port " + quote(port) + " (any free port) needs a binding URL");
  }
  return "tcp://" + std::string(netloc);
}

std::string address_of(std::string_view url, const UrlParts& parts, Transport transport, bool bind) {
  if (transport == Transport::kTcp) return tcp_address(url, parts, bind);
  const std::string where = std::string(parts.netloc) + std::string(parts.path);
  if (transport == Transport::kIpc) {
    if (where.empty()) fail(url, "empty ipc path (expected zpush+ipc:///path)");
    return "ipc://" + where;
  }
  if (where.empty()) fail(url, "empty inproc name (expected zpush+inproc://name)");
  return "inproc://" + where;
}

void check_shared(const Endpoint& first, const Endpoint& other) {
  const std::string pair = "URLs " + quote(first.url) + " and " + quote(other.url);
  if (first.kind != other.kind) {
    throw UrlError(pair + " cannot share one socket: " + std::string(socket_kind_name(first.kind)) + " vs " +
                   std::string(socket_kind_name(other.kind)));
  }
  if (first.kind == SocketKind::kSub && first.topic != other.topic) {
    throw UrlError(pair + " cannot share one socket: topics " + quote(first.topic) + " vs " + quote(other.topic));
  }
}

}  // namespace

Endpoint parse_url(std::string_view url) {
  const UrlParts parts = split_url(url);
  const auto plus = std::string_view(parts.scheme).find('+');
  const Scheme& scheme = find_scheme(url, std::string_view(parts.scheme).substr(0, plus));
  const Transport transport =
      plus == npos ? Transport::kTcp : find_transport(url, std::string_view(parts.scheme).substr(plus + 1));
  if (parts.has_fragment && scheme.kind != SocketKind::kSub) {
    fail(url, "unexpected '#" + std::string(parts.fragment) + "' (only zsub and zrsub take a #topic)");
  }
  return Endpoint{std::string(url), scheme.kind, scheme.bind, address_of(url, parts, transport, scheme.bind),
                  std::string(parts.fragment)};
}

std::vector<Endpoint> parse_urls(std::span<const std::string> patterns, bool expand_braces) {
  if (patterns.empty()) throw UrlError("no URL given");
  std::vector<Endpoint> endpoints;
  const std::vector<std::string> urls =
      expand_braces ? brace_expand_all(patterns) : std::vector<std::string>(patterns.begin(), patterns.end());
  for (const auto& url : urls) endpoints.push_back(parse_url(url));
  for (const auto& endpoint : endpoints) check_shared(endpoints.front(), endpoint);
  return endpoints;
}

std::string_view socket_kind_name(SocketKind kind) {
  switch (kind) {
    case SocketKind::kPush: return "PUSH";
    case SocketKind::kPull: return "PULL";
    case SocketKind::kPub: return "PUB";
    case SocketKind::kSub: return "SUB";
  }
  return "?";  // unreachable for a valid enumerator
}

}  // namespace tensorcom
