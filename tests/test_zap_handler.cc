// ZapHandler (libtensorcom/src/zap_handler.h) answering ZAP requests (RFC 27)
// as libzmq sends them, from a REQ socket on the same context: NULL and
// CURVE peers let in, unlisted keys refused, banned addresses left
// unanswered, and malformed requests refused without harm.
#include "zap_handler.h"

#include <doctest/doctest.h>

#include <zmq_addon.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "address_bans.h"

using tensorcom::detail::AddressBans;
using tensorcom::detail::ZapHandler;

namespace {

// Sends `frames` as one request and returns the reply's status code.
std::string status_of(zmq::socket_t& client, const std::vector<std::string>& frames) {
  std::vector<zmq::message_t> request;
  for (const std::string& frame : frames) request.emplace_back(frame.data(), frame.size());
  REQUIRE(zmq::send_multipart(client, request));
  std::vector<zmq::message_t> reply;
  REQUIRE(zmq::recv_multipart(client, std::back_inserter(reply)));
  REQUIRE(reply.size() == 6);
  return reply[2].to_string();
}

std::vector<std::string> null_request(const std::string& address) {
  return {"1.0", "7", "tensorcom", address, "", "NULL"};
}

struct Zap {
  zmq::context_t context;
  std::shared_ptr<AddressBans> bans = std::make_shared<AddressBans>();
  std::unique_ptr<ZapHandler> handler;
  zmq::socket_t client;

  explicit Zap(const std::optional<std::vector<std::string>>& allowed) {
    handler = std::make_unique<ZapHandler>(context, allowed, bans);
    client = zmq::socket_t(context, zmq::socket_type::req);
    client.set(zmq::sockopt::linger, 0);
    client.set(zmq::sockopt::rcvtimeo, 5000);
    client.connect("inproc://zeromq.zap.01");
  }
  ~Zap() {
    client.close();
    handler.reset();
  }
};

// Whether a request gets any answer within a short wait (from a REQ socket
// of its own: one left waiting cannot send again).
bool answered(Zap& zap, const std::vector<std::string>& frames) {
  zmq::socket_t client(zap.context, zmq::socket_type::req);
  client.set(zmq::sockopt::linger, 0);
  client.set(zmq::sockopt::rcvtimeo, 300);
  client.connect("inproc://zeromq.zap.01");
  std::vector<zmq::message_t> request;
  for (const std::string& frame : frames) request.emplace_back(frame.data(), frame.size());
  REQUIRE(zmq::send_multipart(client, request));
  std::vector<zmq::message_t> reply;
  return zmq::recv_multipart(client, std::back_inserter(reply)).has_value();
}

}  // namespace

TEST_CASE("without an allow-list NULL peers get in; a banned address is left unanswered, never refused") {
  Zap zap(std::nullopt);
  CHECK(status_of(zap.client, null_request("10.0.0.7")) == "200");
  zap.bans->ban("10.0.0.7", AddressBans::Clock::now());
  // A refusal would end the peer's reconnecting for good; unanswered, its
  // connection is dropped (PeerGuard) and it comes back after the ban.
  CHECK_FALSE(answered(zap, null_request("10.0.0.7")));
  CHECK(status_of(zap.client, null_request("10.0.0.8")) == "200");
  CHECK(status_of(zap.client, null_request("")) == "200");  // ipc
  CHECK(zap.bans->refused() == 0);                          // counted where the connection is dropped
  CHECK(zap.handler->refused() == 0);
}

TEST_CASE("with an allow-list only listed CURVE keys get in, and a ban leaves even those unanswered") {
  const std::string listed(32, '\x11');
  char z85[41];
  REQUIRE(zmq_z85_encode(z85, reinterpret_cast<const std::uint8_t*>(listed.data()), 32) != nullptr);
  Zap zap(std::vector<std::string>{z85});
  auto curve = [](const std::string& address, const std::string& key) {
    return std::vector<std::string>{"1.0", "1", "tensorcom", address, "", "CURVE", key};
  };
  CHECK(status_of(zap.client, curve("10.0.0.7", listed)) == "200");
  CHECK(status_of(zap.client, curve("10.0.0.7", std::string(32, '\x22'))) == "400");
  CHECK(status_of(zap.client, null_request("10.0.0.7")) == "400");
  CHECK(zap.handler->refused() == 2);
  zap.bans->ban("10.0.0.7", AddressBans::Clock::now());
  CHECK_FALSE(answered(zap, curve("10.0.0.7", listed)));
}

TEST_CASE("malformed requests are refused and the handler goes on answering") {
  Zap zap(std::nullopt);
  CHECK(status_of(zap.client, {"2.0", "1", "d", "10.0.0.1", "", "NULL"}) == "400");  // unknown version
  CHECK(status_of(zap.client, {"1.0", "1"}) == "400");                               // too few frames
  CHECK(status_of(zap.client, {"1.0", std::string(100000, 'x'), "d", "10.0.0.1", "", "NULL"}) == "200");
  CHECK(status_of(zap.client, null_request("10.0.0.1")) == "200");
}

TEST_CASE("refusals are named a few a minute, the rest only counted") {
  const std::string listed(32, '\x11');
  char z85[41];
  REQUIRE(zmq_z85_encode(z85, reinterpret_cast<const std::uint8_t*>(listed.data()), 32) != nullptr);
  Zap zap(std::vector<std::string>{z85});
  for (int i = 0; i < 40; ++i) {
    const std::string key(32, static_cast<char>(0x30 + i));
    CHECK(status_of(zap.client, {"1.0", "1", "tensorcom", "10.0.0.9", "", "CURVE", key}) == "400");
  }
  CHECK(zap.handler->refused() == 40);
  const std::vector<std::string> lines = zap.handler->take_lines();
  CHECK(lines.size() == 16);
  CHECK(lines.front().find("refused a peer at 10.0.0.9") != std::string::npos);
  CHECK(zap.handler->take_lines().empty());  // the summary of the other 24 waits for the minute's end
}
