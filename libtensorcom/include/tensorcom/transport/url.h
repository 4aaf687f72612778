// tensorcom URLs, the grammar of the Python tensorcom (zcom.py):
//
//   scheme[+transport]://netloc[path][#topic]
//
//   scheme   socket  role        scheme   socket  role
//   zpush    PUSH    connect     zrpush   PUSH    bind
//   zpull    PULL    bind        zrpull   PULL    connect
//   zpub     PUB     bind        zrpub    PUB     connect
//   zsub     SUB     connect     zrsub    SUB     bind
//
// The "r" schemes reverse the usual role, so either end of a pipe may bind.
// transport: tcp (the default), ipc or inproc. The ZeroMQ address is formed
// as the reference does with urlparse:
//   tcp     "tcp://" + netloc   netloc is host:port; path empty or "/"
//   ipc     "ipc://" + netloc + path      zpush+ipc:///tmp/x -> ipc:///tmp/x
//   inproc  "inproc://" + netloc + path
// The fragment is the subscription topic of zsub/zrsub. Public header: no
// ZeroMQ here; the socket layer maps SocketKind to ZeroMQ's constants.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorcom/codec/error.h"

namespace tensorcom {

enum class SocketKind { kPush, kPull, kPub, kSub };

struct Endpoint {
  std::string url;      // the URL as given (after brace expansion)
  SocketKind kind;      // socket type
  bool bind;            // bind (true) or connect (false)
  std::string address;  // the ZeroMQ endpoint: "tcp://host:port", "ipc:///tmp/x", "inproc://name"
  std::string topic;    // subscription topic (zsub/zrsub fragment), else empty
};

// Parses one URL (no brace expansion). The scheme is matched without regard
// to case, as urlparse lowercases it.
// tcp: host is a name, an IPv4 address, a bracketed IPv6 address ("[::1]"),
//   or "*" (binding URLs only); port is decimal 0..65535 or "*", and "*" or 0
//   ("any free port") is allowed only on binding URLs.
// ipc, inproc: netloc + path must be non-empty.
// Returns: the endpoint; `url` is a copy of the argument.
// Throws: UrlError "bad URL '<url>': <what is wrong>" for a missing "://", an
//   unknown scheme or transport, a bad host or port, a path on tcp, an empty
//   ipc path or inproc name, a "?query", or a "#fragment" on a scheme other
//   than zsub/zrsub.
[[nodiscard]] Endpoint parse_url(std::string_view url);

// Brace-expands every pattern (see brace.h), parses each URL, and checks that
// all can share ONE socket: the same SocketKind and, for SUB, the same topic.
// Binding and connecting URLs may be mixed (zpush with zrpush, say).
// Returns: the endpoints in expansion order; never empty.
// Throws: UrlError("no URL given") for no patterns; UrlError from parse_url;
//   UrlError naming the first URL and the first one that disagrees with it;
//   ArgumentError when a pattern expands to too many URLs.
// expand_braces = false takes each pattern as one literal URL (the
// reference's noexpand), for addresses that contain braces.
[[nodiscard]] std::vector<Endpoint> parse_urls(std::span<const std::string> patterns, bool expand_braces = true);

// Returns: "PUSH", "PULL", "PUB" or "SUB" (static storage).
[[nodiscard]] std::string_view socket_kind_name(SocketKind kind);

}  // namespace tensorcom
