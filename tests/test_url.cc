// parse_url / parse_urls: the reference's schemes, roles and addresses, and
// every rejection with the offending URL in its message.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tensorcom/codec/error.h"
#include "tensorcom/transport/url.h"

namespace {

using tensorcom::parse_url;
using tensorcom::parse_urls;
using tensorcom::SocketKind;
using tensorcom::UrlError;

// The message parse_url throws for `url`, or "" if it accepts it.
std::string error_of(const std::string& url) {
  try {
    (void)parse_url(url);
  } catch (const UrlError& e) {
    return e.what();
  }
  return "";
}

// The message parse_urls throws, or "" if it accepts the patterns.
std::string error_of(const std::vector<std::string>& patterns) {
  try {
    (void)parse_urls(patterns);
  } catch (const UrlError& e) {
    return e.what();
  }
  return "";
}

// The failure must name the URL and say what is wrong.
void check_rejected(const std::string& url, const std::string& why) {
  const std::string message = error_of(url);
  INFO("url: ", url, "  message: ", message);
  CHECK(message.find("bad URL '" + url + "': ") == 0);
  CHECK(message.find(why) != std::string::npos);
}

}  // namespace

TEST_CASE("parse_url: schemes, roles and transports") {
  SUBCASE("each scheme's socket kind and role, as zcom.py") {
    struct Row {
      const char* scheme;
      SocketKind kind;
      bool bind;
    };
    const Row rows[] = {
        {"zpush", SocketKind::kPush, false}, {"zpull", SocketKind::kPull, true},  {"zpub", SocketKind::kPub, true},
        {"zsub", SocketKind::kSub, false},   {"zrpush", SocketKind::kPush, true}, {"zrpull", SocketKind::kPull, false},
        {"zrpub", SocketKind::kPub, false},  {"zrsub", SocketKind::kSub, true},
    };
    for (const auto& row : rows) {
      const std::string url = std::string(row.scheme) + "://host:7880";
      CAPTURE(url);
      const auto endpoint = parse_url(url);
      CHECK(endpoint.url == url);
      CHECK(endpoint.kind == row.kind);
      CHECK(endpoint.bind == row.bind);
      CHECK(endpoint.address == "tcp://host:7880");
      CHECK(endpoint.topic.empty());
    }
  }
  SUBCASE("socket_kind_name") {
    CHECK(tensorcom::socket_kind_name(SocketKind::kPush) == "PUSH");
    CHECK(tensorcom::socket_kind_name(SocketKind::kPull) == "PULL");
    CHECK(tensorcom::socket_kind_name(SocketKind::kPub) == "PUB");
    CHECK(tensorcom::socket_kind_name(SocketKind::kSub) == "SUB");
  }
  SUBCASE("tcp hosts and ports") {
    CHECK(parse_url("zpush+tcp://h:1").address == "tcp://h:1");
    CHECK(parse_url("zpush://127.0.0.1:65535").address == "tcp://127.0.0.1:65535");
    CHECK(parse_url("zpush://[::1]:5555").address == "tcp://[::1]:5555");
    CHECK(parse_url("zpush://[fe80::1%eth0]:5555").address == "tcp://[fe80::1%eth0]:5555");
    CHECK(parse_url("zpush://my-host.example.com:80/").address == "tcp://my-host.example.com:80");
    CHECK(parse_url("ZPUSH://h:1").kind == SocketKind::kPush);  // urlparse lowercases schemes
  }
  SUBCASE("binding URLs may ask for any interface and any free port") {
    CHECK(parse_url("zpull://*:7880").address == "tcp://*:7880");
    CHECK(parse_url("zpull://127.0.0.1:0").address == "tcp://127.0.0.1:0");
    CHECK(parse_url("zrpush://*:*").address == "tcp://*:*");
  }
  SUBCASE("ipc is ipc:// + netloc + path") {
    const auto endpoint = parse_url("zpush+ipc:///tmp/x");
    CHECK(endpoint.address == "ipc:///tmp/x");
    CHECK(endpoint.kind == SocketKind::kPush);
    CHECK_FALSE(endpoint.bind);
    CHECK(parse_url("zpull+ipc://sock").address == "ipc://sock");
    CHECK(parse_url("zpull+ipc://run/sock").address == "ipc://run/sock");
  }
  SUBCASE("inproc is inproc:// + netloc + path") {
    CHECK(parse_url("zrpub+inproc://queue").address == "inproc://queue");
    CHECK(parse_url("zpub+inproc://a/b").address == "inproc://a/b");
  }
  SUBCASE("the fragment is the SUB topic") {
    CHECK(parse_url("zsub://h:1#batches").topic == "batches");
    CHECK(parse_url("zrsub+ipc:///tmp/s#t/1").topic == "t/1");
    CHECK(parse_url("zrsub+ipc:///tmp/s#t/1").address == "ipc:///tmp/s");
    CHECK(parse_url("zsub://h:1#").topic.empty());
  }
}

TEST_CASE("parse_url: rejections name the URL and the problem") {
  SUBCASE("unknown scheme, exact message") {
    CHECK_THROWS_WITH_AS((void)parse_url("zfoo://h:1"),
                         "bad URL 'zfoo://h:1': unknown scheme 'zfoo' (expected one of zpush, zpull, "
                         "zpub, zsub, zrpush, zrpull, zrpub, zrsub)",
                         UrlError);
    check_rejected("tcp://h:1", "unknown scheme 'tcp'");
    check_rejected("://h:1", "unknown scheme ''");
  }
  SUBCASE("missing ://") {
    check_rejected("zpush:h:1", "missing '://'");
    check_rejected("h:1", "missing '://'");
    check_rejected("", "missing '://'");
  }
  SUBCASE("unknown transport") {
    check_rejected("zpush+udp://h:1", "unknown transport 'udp'");
    check_rejected("zpush+://h:1", "unknown transport ''");
    check_rejected("zpush+tcp+ipc://h:1", "unknown transport 'tcp+ipc'");
  }
  SUBCASE("bad tcp ports") {
    check_rejected("zpush://h", "missing port");
    check_rejected("zpush://h:", "missing port");
    check_rejected("zpush://[::1]", "missing port");
    check_rejected("zpush://h:65536", "bad port '65536'");
    check_rejected("zpush://h:123456", "bad port '123456'");
    check_rejected("zpush://h:-1", "bad port '-1'");
    check_rejected("zpush://h:http", "bad port 'http'");
    check_rejected("zpush://h:0", "port '0' (any free port) needs a binding URL");
    check_rejected("zsub://h:*", "port '*' (any free port) needs a binding URL");
  }
  SUBCASE("bad tcp hosts") {
    check_rejected("zpush://:1", "missing host");
    check_rejected("zpush://*:1", "host '*' (every interface) needs a binding URL");
    check_rejected("zpull://::1:5555", "bad host '::1'");
    check_rejected("zpull://[]:5555", "bad host '[]'");
    check_rejected("zpull://[::1:5555", "bad host '[::1'");
    check_rejected("zpush://user@h:1", "bad host 'user@h'");
    check_rejected("zpush://h{1,2}:1", "bad host 'h{1,2}'");  // parse_url does not expand
  }
  SUBCASE("a path on tcp") {
    check_rejected("zpush://h:1/x", "unexpected path '/x'");
    check_rejected("zpush://h:1//", "unexpected path '//'");
  }
  SUBCASE("empty ipc path or inproc name") {
    check_rejected("zpush+ipc://", "empty ipc path");
    check_rejected("zpush+inproc://", "empty inproc name");
  }
  SUBCASE("query and misplaced fragment") {
    check_rejected("zpush://h:1?x=1", "unexpected query '?x=1'");
    check_rejected("zsub://h:1?x#t", "unexpected query '?x'");
    check_rejected("zpush://h:1#t", "unexpected '#t'");
    check_rejected("zpub://h:1#", "unexpected '#'");
    check_rejected("zrpull+ipc:///x#t", "unexpected '#t'");
  }
}

TEST_CASE("parse_urls: expansion and one shared socket") {
  SUBCASE("brace patterns expand in bash's order") {
    const auto endpoints = parse_urls(std::vector<std::string>{"zsub://h{1,2}:788{0..3}"});
    std::vector<std::string> urls;
    for (const auto& endpoint : endpoints) {
      CHECK(endpoint.kind == SocketKind::kSub);
      CHECK_FALSE(endpoint.bind);
      urls.push_back(endpoint.url);
    }
    CHECK(urls == std::vector<std::string>{"zsub://h1:7880", "zsub://h1:7881", "zsub://h1:7882", "zsub://h1:7883",
                                           "zsub://h2:7880", "zsub://h2:7881", "zsub://h2:7882", "zsub://h2:7883"});
    CHECK(endpoints[5].address == "tcp://h2:7881");
  }
  SUBCASE("several patterns concatenate; binding and connecting may mix") {
    const auto endpoints =
        parse_urls(std::vector<std::string>{"zpush://a:{1..2}", "zrpush+ipc:///tmp/q", "zpush+inproc://i"});
    REQUIRE(endpoints.size() == 4);
    CHECK(endpoints[0].address == "tcp://a:1");
    CHECK(endpoints[1].address == "tcp://a:2");
    CHECK(endpoints[2].address == "ipc:///tmp/q");
    CHECK(endpoints[2].bind);
    CHECK(endpoints[3].address == "inproc://i");
    CHECK_FALSE(endpoints[3].bind);
  }
  SUBCASE("without expansion each pattern is one literal URL") {
    const auto endpoints = parse_urls(std::vector<std::string>{"zpull+ipc:///tmp/a{1,2}", "zpull+ipc:///tmp/b"}, false);
    REQUIRE(endpoints.size() == 2);
    CHECK(endpoints[0].address == "ipc:///tmp/a{1,2}");
    CHECK(endpoints[1].address == "ipc:///tmp/b");
    CHECK(parse_urls(std::vector<std::string>{"zpull+ipc:///tmp/a{1,2}"}, true).size() == 2);
  }
  SUBCASE("SUB URLs sharing a topic") {
    const auto endpoints = parse_urls(std::vector<std::string>{"zsub://h:1#t", "zrsub://*:2#t"});
    REQUIRE(endpoints.size() == 2);
    CHECK(endpoints[1].topic == "t");
  }
  SUBCASE("no URL") { CHECK_THROWS_WITH_AS((void)parse_urls(std::vector<std::string>{}), "no URL given", UrlError); }
  SUBCASE("mixed socket kinds are rejected, naming both URLs") {
    CHECK(error_of(std::vector<std::string>{"zpush://a:1", "zpull://*:2"}) ==
          "URLs 'zpush://a:1' and 'zpull://*:2' cannot share one socket: PUSH vs PULL");
    CHECK(error_of(std::vector<std::string>{"z{push,sub}://a:1"}) ==
          "URLs 'zpush://a:1' and 'zsub://a:1' cannot share one socket: PUSH vs SUB");
  }
  SUBCASE("SUB URLs with different topics are rejected") {
    CHECK(error_of(std::vector<std::string>{"zsub://h:1#{a,b}"}) ==
          "URLs 'zsub://h:1#a' and 'zsub://h:1#b' cannot share one socket: topics 'a' vs 'b'");
    CHECK(error_of(std::vector<std::string>{"zsub://h:1", "zsub://h:2#x"}) ==
          "URLs 'zsub://h:1' and 'zsub://h:2#x' cannot share one socket: topics '' vs 'x'");
  }
  SUBCASE("a bad expanded URL is reported as itself") {
    CHECK(error_of(std::vector<std::string>{"zpush://h:{65535..65536}"}).find("bad URL 'zpush://h:65536'") == 0);
  }
  SUBCASE("too many URLs") {
    CHECK_THROWS_AS((void)parse_urls(std::vector<std::string>{"zpush://h{0..9999}:{1..1000}"}),
                    tensorcom::ArgumentError);
  }
}
