// Confirmed delivery: receipts on the wire, a ConfirmedDelivery sender and
// the receiving Connection's receipts, over real ipc and tcp sockets.
#include <doctest/doctest.h>

#include <zmq.hpp>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "receipt_wire.h"
#include "tensorcom/codec/metadata.h"
#include "tensorcom/transport/connection.h"
#include "tensorcom/transport/connection_controls.h"
#include "tensorcom/transport/curve.h"
#include "tensorcom/transport/delivery.h"
#include "test_support.h"

using namespace tensorcom;
using namespace std::chrono_literals;
using tensorcom::testing::TempDir;

namespace {

TensorList make_batch(std::int32_t id) {
  Tensor images = Tensor::allocate(DType::kUInt8, {2, 4, 4, 3});
  for (std::size_t i = 0; i < images.nbytes(); ++i) images.data()[i] = static_cast<std::byte>(id + i);
  Tensor labels = Tensor::zeros(DType::kInt32, {2});
  labels.values<std::int32_t>()[0] = id;
  return {images, labels};
}

// A batch whose metadata asks for a receipt of `sequence`.
TensorList confirmed_batch(std::int32_t id, std::uint64_t sequence, const DeliveryReceipt& receipt,
                           const std::string& server = "sender") {
  TensorList batch = make_batch(id);
  BatchMetadata m;
  m.keys = {"a", "b"};
  m.shards = {"s", "s"};
  m.server = server;
  m.sequence = sequence;
  m.receipt = receipt;
  batch.push_back(metadata_tensor(m));
  return batch;
}

std::int32_t id_of(const TensorList& batch) { return batch.at(1).values<std::int32_t>()[0]; }

std::string ipc(const TempDir& dir, const std::string& scheme) {
  return scheme + "+ipc://" + (dir.path / "d").string();
}

ConnectionOptions receiving(std::vector<std::string>* log = nullptr) {
  ConnectionOptions o;
  o.timeout = 5000ms;
  if (log) o.log = [log](std::string_view line) { log->emplace_back(line); };
  return o;
}

// Receives until `wait` passes without a batch; the ids, in order.
std::vector<std::int32_t> drain(Connection& pull, std::chrono::milliseconds wait = 500ms) {
  std::vector<std::int32_t> ids;
  while (auto batch = pull.recv(wait)) ids.push_back(id_of(*batch));
  return ids;
}

// Sends `count` batches through `delivery`, ids and sequences from `first`.
void send_all(ConfirmedDelivery& delivery, int first, int count) {
  for (int i = first; i < first + count; ++i) {
    REQUIRE(delivery.send(static_cast<std::uint64_t>(i),
                          confirmed_batch(i, static_cast<std::uint64_t>(i), delivery.receipt()), StoppableSend{}));
  }
}

}  // namespace

TEST_CASE("receipts on the wire") {
  using namespace tensorcom::detail;
  SUBCASE("a run and its sequences round-trip") {
    const std::vector<std::uint64_t> sequences = {0, 7, ~std::uint64_t{0}};
    const auto bytes = encode_receipt(0x0123456789abcdefULL, sequences);
    CHECK(bytes.size() == 32);
    const auto receipt = decode_receipt(bytes);
    REQUIRE(receipt);
    CHECK(receipt->run == 0x0123456789abcdefULL);
    CHECK(receipt->sequences == sequences);
  }
  SUBCASE("sizes that are no receipt are refused") {
    for (std::size_t size : {std::size_t{0}, std::size_t{8}, std::size_t{15}, std::size_t{17}, kMaxReceiptBytes + 8}) {
      CHECK_FALSE(decode_receipt(std::vector<std::byte>(size)));
    }
    CHECK(decode_receipt(std::vector<std::byte>(kMaxReceiptBytes)));
  }
  SUBCASE("receipt addresses: the peer's host, tensorcom's ipc names, nothing else") {
    CHECK(receipt_endpoint("tcp:40001", "10.1.2.3") == "tcp://10.1.2.3:40001");
    CHECK(receipt_endpoint("tcp:40001", "fe80::1") == "tcp://[fe80::1]:40001");
    CHECK_FALSE(receipt_endpoint("tcp:40001", ""));
    for (const char* bad : {"tcp:0", "tcp:65536", "tcp:12x", "tcp:", "tcp:-1", "tcp:evil.example:80"}) {
      CHECK_FALSE(receipt_endpoint(bad, "10.1.2.3"));
    }
    CHECK(receipt_endpoint("ipc:@tensorcom-receipt-0123456789abcdef", "") ==
          "ipc://@tensorcom-receipt-0123456789abcdef");
    for (const char* bad : {"ipc:/tmp/socket", "ipc:@tensorcom-receipt-0123", "ipc:@tensorcom-receipt-0123456789ABCDEF",
                            "ipc:@other-0123456789abcdef", "inproc:x", "udp:1"}) {
      CHECK_FALSE(receipt_endpoint(bad, ""));
    }
  }
}

TEST_CASE("confirmed delivery") {
  TempDir dir;

  SUBCASE("every batch confirmed once received") {
    Connection pull({ipc(dir, "zpull")}, receiving());
    Connection push({ipc(dir, "zpush")});
    ConfirmedDelivery delivery(push);
    REQUIRE(delivery.receipt().to.size() == 1);
    CHECK(delivery.receipt().to[0].starts_with("ipc:@tensorcom-receipt-"));
    send_all(delivery, 0, 20);
    const auto ids = drain(pull);
    CHECK(ids.size() == 20);
    CHECK(delivery.settle(5000ms, {}) == 0);
    const DeliveryCounts counts = delivery.counts();
    CHECK(counts.sent == 20);
    CHECK(counts.confirmed == 20);
    CHECK(counts.resent == 0);
    CHECK(counts.bad_receipts == 0);
  }

  SUBCASE("over tcp the receipt goes to the host the batch came from") {
    Connection push({"zrpush://127.0.0.1:0"});
    const std::string url = "zrpull://" + push.bound_addresses().at(0).substr(6);
    Connection pull({url}, receiving());
    ConfirmedDelivery delivery(push);
    REQUIRE(delivery.receipt().to.size() == 1);
    CHECK(delivery.receipt().to[0].starts_with("tcp:"));
    send_all(delivery, 0, 5);
    CHECK(drain(pull).size() == 5);
    CHECK(delivery.settle(5000ms, {}) == 0);
  }

  SUBCASE("a receiver that binds after the sender started gets everything") {
    Connection push({ipc(dir, "zpush")});
    ConfirmedDelivery delivery(push);
    send_all(delivery, 0, 10);  // queued: the connection is not made yet
    std::this_thread::sleep_for(300ms);
    Connection pull({ipc(dir, "zpull")}, receiving());
    CHECK(drain(pull).size() == 10);
    CHECK(delivery.settle(5000ms, {}) == 0);
  }

  SUBCASE("what a lost connection took is sent again, and taken once") {
    Connection push({ipc(dir, "zpush")});
    DeliveryOptions options;
    options.resend_after = 200ms;
    ConfirmedDelivery delivery(push, options);
    std::set<std::int32_t> taken;
    std::size_t received = 0;
    {
      Connection first({ipc(dir, "zpull")}, receiving());
      send_all(delivery, 0, 30);
      for (int i = 0; i < 3; ++i) {
        auto batch = first.recv(5000ms);
        REQUIRE(batch);
        taken.insert(id_of(*batch));
        ++received;
      }
      std::this_thread::sleep_for(200ms);  // the rest sits in its queue, then goes with it
    }
    Connection second({ipc(dir, "zpull")}, receiving());
    CHECK(delivery.settle(10000ms, [&] {
      while (auto batch = second.recv(10ms)) {
        taken.insert(id_of(*batch));
        ++received;
      }
      return false;
    }) == 0);
    for (const std::int32_t id : drain(second, 300ms)) {
      taken.insert(id);
      ++received;
    }
    CHECK(taken.size() == 30);
    CHECK(received == 30);  // no copy reached the application
    CHECK(delivery.counts().resent > 0);
    CHECK(delivery.counts().confirmed == 30);
  }

  SUBCASE("with CURVE the receipts are encrypted too, to a key the batches carry") {
    const CurveKeyPair server = generate_curve_keypair();
    const CurveKeyPair client = generate_curve_keypair();
    ConnectionOptions push_options;
    push_options.curve = CurveSecurity{server, "", std::vector<std::string>{client.public_key}};
    Connection push({"zrpush://127.0.0.1:0"}, push_options);
    ConnectionOptions pull_options = receiving();
    pull_options.curve = CurveSecurity{client, server.public_key, std::nullopt};
    Connection pull({"zrpull://" + push.bound_addresses().at(0).substr(6)}, pull_options);
    ConfirmedDelivery delivery(push);
    CHECK(delivery.receipt().key.size() == 40);
    CHECK(delivery.receipt().key != server.public_key);
    send_all(delivery, 0, 5);
    CHECK(drain(pull).size() == 5);
    CHECK(delivery.settle(5000ms, {}) == 0);
    CHECK(delivery.counts().confirmed == 5);
  }

  SUBCASE("no receiver: settle says what is unconfirmed") {
    Connection push({ipc(dir, "zpush")});
    ConfirmedDelivery delivery(push);
    send_all(delivery, 5, 3);
    CHECK(delivery.settle(300ms, {}) == 3);
    CHECK(delivery.unconfirmed() == std::vector<std::uint64_t>{5, 6, 7});
    CHECK(delivery.counts().confirmed == 0);
  }

  SUBCASE("a full window holds the sender until a stop") {
    Connection push({ipc(dir, "zpush")});
    DeliveryOptions options;
    options.window = 4;
    ConfirmedDelivery delivery(push, options);
    send_all(delivery, 0, 4);
    const auto start = std::chrono::steady_clock::now();
    StoppableSend how;
    how.stop_requested = [&] { return std::chrono::steady_clock::now() - start > 300ms; };
    CHECK_FALSE(delivery.send(4, confirmed_batch(4, 4, delivery.receipt()), how));
    CHECK(delivery.counts().unconfirmed == 4);
    CHECK(delivery.counts().sent == 4);
  }

  SUBCASE("receipts of another run, or malformed, confirm nothing") {
    Connection push({"zrpush://127.0.0.1:0"});
    ConfirmedDelivery delivery(push);
    ConnectionOptions silent = receiving();
    silent.confirm_delivery = false;
    Connection pull({"zrpull://" + push.bound_addresses().at(0).substr(6)}, silent);
    send_all(delivery, 0, 2);
    CHECK(drain(pull).size() == 2);
    zmq::context_t context;
    zmq::socket_t forger(context, zmq::socket_type::push);
    forger.set(zmq::sockopt::linger, 1000);
    forger.connect("tcp://127.0.0.1:" + delivery.receipt().to.at(0).substr(4));
    const std::vector<std::uint64_t> both = {0, 1};
    const auto other_run = detail::encode_receipt(delivery.receipt().run + 1, both);
    forger.send(zmq::buffer(other_run.data(), other_run.size()));
    forger.send(zmq::str_buffer("not a receipt"));
    // Larger than any receipt: ZeroMQ refuses it before allocating it.
    const std::vector<std::byte> huge(std::size_t{1} << 20);
    forger.send(zmq::buffer(huge.data(), huge.size()));
    CHECK(delivery.settle(500ms, {}) == 2);
    CHECK(delivery.counts().bad_receipts == 2);
  }

  SUBCASE("a receiver drops a copy of a batch it took; one that does not confirm takes both") {
    Connection push({ipc(dir, "zpush")});
    ConfirmedDelivery delivery(push);
    Connection pull({ipc(dir, "zpull")}, receiving());
    const TensorList batch = confirmed_batch(1, 1, delivery.receipt());
    push.send(batch);
    push.send(batch);
    push.send(confirmed_batch(2, 2, delivery.receipt()));
    CHECK(drain(pull) == std::vector<std::int32_t>{1, 2});
    pull.close();

    ConnectionOptions plain = receiving();
    plain.confirm_delivery = false;
    Connection unconfirming({ipc(dir, "zpull")}, plain);
    push.send(batch);
    push.send(batch);
    CHECK(drain(unconfirming) == std::vector<std::int32_t>{1, 1});
  }

  SUBCASE("a PUB or inproc-only connection cannot confirm") {
    Connection pub({ipc(dir, "zpub")});
    CHECK_THROWS_AS(ConfirmedDelivery{pub}, ArgumentError);
    Connection inproc({"zrpush+inproc://only-here"});
    CHECK_THROWS_AS(ConfirmedDelivery{inproc}, ArgumentError);
  }
}

// Batch `id` of stream 0/1 (one fingerprint), as `server` sends it.
TensorList stream_batch(std::int32_t id, const std::string& server) {
  TensorList batch = make_batch(id);
  BatchMetadata m;
  m.server = server;
  m.place = StreamPlace{"0/1", "00112233445566aa", 0, static_cast<std::uint64_t>(id), std::nullopt, false};
  batch.push_back(metadata_tensor(m));
  return batch;
}

TEST_CASE("one stream from two servers at once is said once") {
  TempDir dir;
  std::vector<std::string> log;
  Connection pull({ipc(dir, "zpull")}, receiving(&log));
  SUBCASE("a server that replaced another is no duplicate") {
    Connection a({ipc(dir, "zpush")});
    a.send(stream_batch(0, "host:1"));
    a.send(stream_batch(1, "host:1"));
    CHECK(drain(pull).size() == 2);
    a.send(stream_batch(2, "host:2"));  // a restart: host:1 sent nothing since
    a.send(stream_batch(3, "host:2"));
    CHECK(drain(pull).size() == 2);
    CHECK(log.empty());
  }
  SUBCASE("two servers interleaved") {
    Connection a({ipc(dir, "zpush")});
    for (int i = 0; i < 6; ++i) a.send(stream_batch(i, i % 2 ? "host:1" : "host:2"));
    CHECK(drain(pull).size() == 6);
    REQUIRE(log.size() == 1);
    CHECK(log[0].find("the same stream '0/1'") != std::string::npos);
    CHECK(log[0].find("host:1") != std::string::npos);
    CHECK(log[0].find("host:2") != std::string::npos);
  }
}

TEST_CASE("a strict receiver refuses one stream from two servers, and every batch after") {
  TempDir dir;
  std::vector<std::string> log;
  ConnectionOptions strict = receiving(&log);
  strict.refuse_duplicate_streams = true;
  Connection pull({ipc(dir, "zpull")}, strict);
  Connection a({ipc(dir, "zpush")});
  a.send(stream_batch(0, "host:1"));
  a.send(stream_batch(1, "host:2"));
  a.send(stream_batch(2, "host:1"));
  a.send(stream_batch(3, "host:2"));
  // Until host:1 sends again, host:2 may have replaced it (a restart).
  for (std::int32_t id : {0, 1}) {
    auto batch = pull.recv(5000ms);
    REQUIRE(batch);
    CHECK(id_of(*batch) == id);
  }
  try {
    (void)pull.recv(5000ms);
    FAIL("a batch of the stream from two servers was taken");
  } catch (const TransportError& e) {
    const std::string what = e.what();
    CHECK(what.find("refusing batches: the same stream '0/1'") != std::string::npos);
    CHECK(what.find("host:1") != std::string::npos);
    CHECK(what.find("host:2") != std::string::npos);
  }
  CHECK_THROWS_AS((void)pull.recv(5000ms), TransportError);  // and the batch after
  CHECK(log.empty());
}
