// Connection over real sockets: ipc in a temp dir and tcp on 127.0.0.1 port 0.
#include <doctest/doctest.h>

#include <unistd.h>
#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "tensorcom/transport/connection.h"
#include "tensorcom/transport/connection_controls.h"
#include "test_support.h"

using namespace tensorcom;
using namespace std::chrono_literals;
using tensorcom::testing::TempDir;

namespace {

TensorList make_batch(std::int32_t id, std::int64_t size = 4) {
  Tensor images = Tensor::allocate(DType::kUInt8, {size, 8, 8, 3});
  for (std::size_t i = 0; i < images.nbytes(); ++i) images.data()[i] = static_cast<std::byte>(id + i);
  Tensor labels = Tensor::zeros(DType::kInt32, {size});
  labels.values<std::int32_t>()[0] = id;
  return {images, labels};
}

std::int32_t id_of(const TensorList& batch) { return batch.at(1).values<std::int32_t>()[0]; }

std::string ipc_url(const std::string& scheme, const TempDir& dir, const std::string& name) {
  return scheme + "+ipc://" + (dir.path / name).string();
}

// "tcp://127.0.0.1:41234" -> "127.0.0.1:41234"
std::string host_port(const std::string& address) { return address.substr(address.find("://") + 3); }

void check_same(const TensorList& a, const TensorList& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].same_as(b[i]));
}

}  // namespace

TEST_CASE("push and pull") {
  TempDir dir;
  ConnectionOptions receive_options;
  receive_options.timeout = 5000ms;

  SUBCASE("ipc, multipart: batches arrive intact, as views of the message") {
    Connection pull({ipc_url("zpull", dir, "a")}, receive_options);
    Connection push({ipc_url("zpush", dir, "a")});
    for (int i = 0; i < 5; ++i) push.send(make_batch(i));
    for (int i = 0; i < 5; ++i) {
      auto batch = pull.recv(5000ms);
      REQUIRE(batch.has_value());
      check_same(*batch, make_batch(i));
      CHECK((*batch)[0].owner() != nullptr);
      CHECK((*batch)[0].owner() == (*batch)[1].owner());
    }
    CHECK(pull.stats().batches() == 5);
    CHECK(pull.stats().samples() == 20);
    CHECK(push.stats().batches() == 5);
  }
  SUBCASE("a bound PUSH with no receiver is not writable until one connects") {
    Connection push({ipc_url("zrpush", dir, "w")});
    CHECK_FALSE(wait_writable(push, 50ms));
    Connection pull({ipc_url("zrpull", dir, "w")}, receive_options);
    CHECK(wait_writable(push, 5000ms));
    push.send(make_batch(1));
    REQUIRE(pull.recv(5000ms).has_value());
    pull.close();
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (wait_writable(push, 10ms) && std::chrono::steady_clock::now() < deadline) {
    }
    CHECK_FALSE(wait_writable(push, 50ms));  // its only receiver gone
  }
  SUBCASE("try_send never blocks: a PUSH with no receiver sends nothing, then sends once one comes") {
    Connection push({ipc_url("zrpush", dir, "t")});
    for (const Framing framing : {Framing::kMultipart, Framing::kSingleBuffer}) {
      ConnectionOptions framed;
      framed.framing = framing;
      Connection alone({ipc_url("zrpush", dir, framing == Framing::kMultipart ? "tm" : "ts")}, framed);
      CHECK(alone.try_send(make_batch(1)) == Connection::Sent::kWouldBlock);
      CHECK(alone.stats().batches() == 0);
    }
    CHECK(push.try_send(make_batch(1)) == Connection::Sent::kWouldBlock);
    Connection pull({ipc_url("zrpull", dir, "t")}, receive_options);
    REQUIRE(wait_writable(push, 5000ms));
    CHECK(push.try_send(make_batch(2)) == Connection::Sent::kYes);
    CHECK(push.stats().batches() == 1);
    auto got = pull.recv(5000ms);
    REQUIRE(got.has_value());
    CHECK(id_of(*got) == 2);  // the refused batch was never sent
  }
  SUBCASE("send_until_stopped: waits for a receiver in slices, and a stop ends the wait with nothing sent") {
    Connection push({ipc_url("zrpush", dir, "u")});
    std::atomic<int> polls{0};
    StoppableSend how;
    how.slice = 10ms;
    how.stop_requested = [&] { return ++polls > 5; };
    const auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(send_until_stopped(push, make_batch(1), how));
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    CHECK(polls > 5);
    CHECK(push.stats().batches() == 0);
    // A receiver that comes while it waits gets the batch.
    polls = 0;
    how.stop_requested = [&] { return false; };
    std::thread late([&] {
      std::this_thread::sleep_for(100ms);
      Connection pull({ipc_url("zrpull", dir, "u")}, receive_options);
      auto got = pull.recv(5000ms);
      REQUIRE(got.has_value());
      CHECK(id_of(*got) == 2);
    });
    CHECK(send_until_stopped(push, make_batch(2), how));
    late.join();
    CHECK(push.stats().batches() == 1);
  }
  SUBCASE("send_until_stopped: a PUB waits for as many subscribers as asked, telling the count") {
    Connection pub({ipc_url("zpub", dir, "s")});
    std::vector<std::uint64_t> told;
    StoppableSend how;
    how.subscribers = 2;
    how.slice = 10ms;
    how.on_subscribers = [&](std::uint64_t n) { told.push_back(n); };
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    how.stop_requested = [&] { return std::chrono::steady_clock::now() > deadline; };
    Connection one({ipc_url("zsub", dir, "s")}, receive_options);
    std::thread second([&] {
      std::this_thread::sleep_for(300ms);
      Connection two({ipc_url("zsub", dir, "s")}, receive_options);
      REQUIRE(two.recv(5000ms).has_value());
    });
    CHECK(send_until_stopped(pub, make_batch(3), how));
    second.join();
    REQUIRE(one.recv(5000ms).has_value());
    REQUIRE_FALSE(told.empty());
    CHECK(told.back() == 2);
    CHECK(std::find(told.begin(), told.end(), 1) != told.end());  // it waited while one was in
  }
  SUBCASE("a stop shortens a sender's linger: PUB to none, PUSH to at most kStopLinger") {
    ConnectionOptions patient;
    patient.linger = 10000ms;
    Connection pub({ipc_url("zpub", dir, "s1")}, patient);
    shorten_linger_for_stop(pub);
    CHECK(pub.options().linger == 0ms);
    Connection push({ipc_url("zrpush", dir, "s2")}, patient);
    shorten_linger_for_stop(push);
    CHECK(push.options().linger == kStopLinger);
    ConnectionOptions brief;
    brief.linger = 300ms;
    Connection quick({ipc_url("zrpush", dir, "s3")}, brief);
    shorten_linger_for_stop(quick);
    CHECK(quick.options().linger == 300ms);  // never lengthened
    Connection pull({ipc_url("zrpull", dir, "s4")}, patient);
    shorten_linger_for_stop(pull);
    CHECK(pull.options().linger == 10000ms);  // a receiver closes at once anyway
  }
  SUBCASE("tcp on port 0, single-buffer framing is detected") {
    Connection pull({"zpull://127.0.0.1:0"}, receive_options);
    auto bound = pull.bound_addresses();
    REQUIRE(bound.size() == 1);
    CHECK(bound[0].rfind("tcp://127.0.0.1:", 0) == 0);
    ConnectionOptions send_options;
    send_options.framing = Framing::kSingleBuffer;
    Connection push({"zpush://" + host_port(bound[0])}, send_options);
    push.send(make_batch(7));
    auto batch = pull.recv(5000ms);
    REQUIRE(batch.has_value());
    check_same(*batch, make_batch(7));
  }
  SUBCASE("reversed roles: zrpush binds, zrpull connects") {
    Connection push({ipc_url("zrpush", dir, "r")});
    Connection pull({ipc_url("zrpull", dir, "r")}, receive_options);
    push.send(make_batch(3));
    auto batch = pull.recv(5000ms);
    REQUIRE(batch.has_value());
    CHECK(id_of(*batch) == 3);
  }
  SUBCASE("one socket receives from several URLs") {
    Connection pull({ipc_url("zpull", dir, "{x,y}")}, receive_options);
    CHECK(pull.endpoints().size() == 2);
    Connection push_x({ipc_url("zpush", dir, "x")});
    Connection push_y({ipc_url("zpush", dir, "y")});
    for (int i = 0; i < 3; ++i) {
      push_x.send(make_batch(i));
      push_y.send(make_batch(100 + i));
    }
    std::multiset<std::int32_t> ids;
    for (int i = 0; i < 6; ++i) {
      auto batch = pull.recv(5000ms);
      REQUIRE(batch.has_value());
      ids.insert(id_of(*batch));
    }
    CHECK(ids == std::multiset<std::int32_t>{0, 1, 2, 100, 101, 102});
  }
  SUBCASE("one socket sends round-robin to several URLs") {
    Connection pull_x({ipc_url("zpull", dir, "x")}, receive_options);
    Connection pull_y({ipc_url("zpull", dir, "y")}, receive_options);
    Connection push({ipc_url("zpush", dir, "{x,y}")});
    // Wait until both peers are connected, so that the round-robin covers both.
    std::this_thread::sleep_for(200ms);
    for (int i = 0; i < 6; ++i) push.send(make_batch(i));
    int from_x = 0, from_y = 0;
    while (pull_x.recv(500ms)) ++from_x;
    while (pull_y.recv(500ms)) ++from_y;
    CHECK(from_x + from_y == 6);
    CHECK(from_x == 3);
  }
  SUBCASE("one of two senders dying does not stop the other") {
    Connection pull({ipc_url("zpull", dir, "{x,y}")}, receive_options);
    Connection push_y({ipc_url("zpush", dir, "y")});
    {
      Connection push_x({ipc_url("zpush", dir, "x")});
      push_x.send(make_batch(1));
      REQUIRE(pull.recv(5000ms).has_value());
    }
    push_y.send(make_batch(2));
    auto batch = pull.recv(5000ms);
    REQUIRE(batch.has_value());
    CHECK(id_of(*batch) == 2);
  }
}

TEST_CASE("publish and subscribe") {
  TempDir dir;
  auto send_until_received = [](Connection& pub, Connection& sub, const TensorList& batch) {
    // A subscription takes a moment to reach the publisher: resend until it has.
    for (int attempt = 0; attempt < 100; ++attempt) {
      pub.send(batch);
      if (auto got = sub.recv(50ms)) return got;
    }
    return std::optional<TensorList>();
  };
  SUBCASE("zpub/zsub over tcp") {
    Connection pub({"zpub://127.0.0.1:0"});
    Connection sub({"zsub://" + host_port(pub.bound_addresses().at(0))});
    auto got = send_until_received(pub, sub, make_batch(5));
    REQUIRE(got.has_value());
    check_same(*got, make_batch(5));
  }
  SUBCASE("the fragment is the topic: a prefix of the first frame, as in the reference") {
    Connection pub({ipc_url("zpub", dir, "p")});
    Connection sub({ipc_url("zsub", dir, "p") + "#f4"});
    CHECK(sub.endpoints()[0].topic == "f4");
    TensorList floats{Tensor::zeros(DType::kFloat32, {2})};
    REQUIRE(send_until_received(pub, sub, floats).has_value());
    pub.send(make_batch(1));  // uint8 first: filtered out
    pub.send(floats);
    auto next = sub.recv(2000ms);
    REQUIRE(next.has_value());
    CHECK((*next)[0].dtype() == DType::kFloat32);
  }
}

TEST_CASE("publishers and their subscribers") {
  TempDir dir;
  SUBCASE("with no subscriber a batch is counted as dropped, not sent") {
    Connection pub({ipc_url("zpub", dir, "d")});
    CHECK(subscribers(pub) == 0);
    CHECK_FALSE(wait_for_subscriber(pub, 20ms));
    CHECK_FALSE(pub.send(make_batch(1)));
    CHECK(dropped_without_subscriber(pub) == 1);
    CHECK(pub.try_send(make_batch(1)) == Connection::Sent::kNoSubscriber);
    CHECK(dropped_without_subscriber(pub) == 2);
    CHECK(pub.stats().batches() == 0);
    ConnectionOptions awaiting;
    awaiting.await_subscriber = true;
    Connection patient({ipc_url("zpub", dir, "da")}, awaiting);
    CHECK(patient.try_send(make_batch(1)) == Connection::Sent::kWouldBlock);  // send() would wait
    CHECK(dropped_without_subscriber(patient) == 0);
  }
  SUBCASE("subscribers are counted as they come and go") {
    Connection pub({ipc_url("zpub", dir, "c")});
    {
      Connection sub({ipc_url("zsub", dir, "c")});
      REQUIRE(wait_for_subscriber(pub, 5000ms));
      CHECK(subscribers(pub) == 1);
      CHECK(pub.send(make_batch(3)));
      auto got = sub.recv(5000ms);
      REQUIRE(got.has_value());
      CHECK(id_of(*got) == 3);
    }
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (subscribers(pub) != 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    CHECK(subscribers(pub) == 0);
  }
  SUBCASE("await_subscriber: the first batch waits for the first subscriber and is not lost") {
    ConnectionOptions options;
    options.await_subscriber = true;
    Connection pub({"zpub://127.0.0.1:0"}, options);
    const std::string address = "zsub://" + host_port(pub.bound_addresses().at(0));
    std::optional<TensorList> got;
    std::thread late([&] {
      std::this_thread::sleep_for(100ms);
      Connection sub({address});
      got = sub.recv(5000ms);
    });
    CHECK(pub.send(make_batch(9)));  // blocks until the subscription is in
    late.join();
    REQUIRE(got.has_value());
    CHECK(id_of(*got) == 9);
    CHECK(dropped_without_subscriber(pub) == 0);
  }
  SUBCASE("an oversized subscription is refused; other subscribers are served") {
    Connection pub({ipc_url("zpub", dir, "o")});
    zmq::context_t context;
    zmq::socket_t hostile(context, zmq::socket_type::sub);
    hostile.set(zmq::sockopt::linger, 0);
    // Past the 4 KiB limit; not larger: ZeroMQ keeps a subscription in a trie
    // one node a byte, freed recursively, on the hostile side too.
    hostile.set(zmq::sockopt::subscribe, std::string(16 << 10, 'x'));
    hostile.connect("ipc://" + (dir.path / "o").string());
    CHECK_FALSE(wait_for_subscriber(pub, 300ms));
    Connection sub({ipc_url("zsub", dir, "o")});
    REQUIRE(wait_for_subscriber(pub, 5000ms));
    CHECK(subscribers(pub) == 1);
    CHECK(pub.send(make_batch(4)));
    auto got = sub.recv(5000ms);
    REQUIRE(got.has_value());
    CHECK(id_of(*got) == 4);
  }
}

TEST_CASE("timeouts, totals and misuse") {
  TempDir dir;
  SUBCASE("recv returns nothing when the time passes") {
    Connection pull({ipc_url("zpull", dir, "t")});
    auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(pull.recv(100ms).has_value());
    CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  }
  SUBCASE("iteration names the silent URLs") {
    ConnectionOptions options;
    options.timeout = 100ms;
    Connection pull({ipc_url("zpull", dir, "{t,u}")}, options);
    auto iterate = [&] {
      for (auto& batch : pull) (void)batch;
    };
    CHECK_THROWS_WITH_AS(iterate(), doctest::Contains("no batch within 100 ms from zpull+ipc://"), TimeoutError);
    CHECK_THROWS_WITH_AS(iterate(), doctest::Contains("/u"), TimeoutError);
  }
  SUBCASE("iteration stops after total") {
    ConnectionOptions options;
    options.total = 3;
    options.timeout = 5000ms;
    Connection pull({ipc_url("zpull", dir, "n")}, options);
    Connection push({ipc_url("zpush", dir, "n")});
    for (int i = 0; i < 5; ++i) push.send(make_batch(i));
    std::vector<std::int32_t> ids;
    for (auto& batch : pull) ids.push_back(id_of(batch));
    CHECK(ids == std::vector<std::int32_t>{0, 1, 2});
    CHECK(pull.size() == 100000);
  }
  SUBCASE("wrong direction and bad URLs") {
    Connection push({ipc_url("zpush", dir, "w")});
    CHECK_THROWS_WITH_AS((void)push.recv(10ms), doctest::Contains("recv is not possible on a PUSH connection"),
                         TransportError);
    CHECK_THROWS_AS(Connection({"zfoo://127.0.0.1:1"}), UrlError);
    CHECK_THROWS_AS(Connection({"zpush://127.0.0.1:1", "zpull://127.0.0.1:2"}), UrlError);
  }
  SUBCASE("a busy address is a TransportError naming it") {
    Connection first({"zpull://127.0.0.1:0"});
    std::string taken = "zpull://" + host_port(first.bound_addresses().at(0));
    CHECK_THROWS_WITH_AS(Connection({taken}), doctest::Contains(taken.c_str()), TransportError);
  }
}

TEST_CASE("malformed messages are counted by kind, logged once a kind, and skipped") {
  TempDir dir;
  ConnectionOptions options;
  options.max_message_size = 4096;
  options.limits.max_tensors = 1;
  std::vector<std::string> lines;
  options.log = [&lines](std::string_view line) { lines.emplace_back(line); };
  Connection pull({ipc_url("zpull", dir, "m")}, options);
  zmq::context_t context;
  zmq::socket_t raw(context, zmq::socket_type::push);
  raw.set(zmq::sockopt::linger, 1000);
  raw.connect("ipc://" + (dir.path / "m").string());

  TensorList good = make_batch(9);
  std::vector<std::byte> header(header_size(good[1]));
  write_header(good[1], header);
  // An odd frame count.
  raw.send(zmq::buffer(header.data(), header.size()), zmq::send_flags::none);
  // A header whose dtype is unknown.
  auto bad_header = header;
  std::memcpy(bad_header.data(), "zz\0\0\0\0\0\0", 8);
  raw.send(zmq::buffer(bad_header.data(), bad_header.size()), zmq::send_flags::sndmore);
  raw.send(zmq::buffer(good[1].data(), good[1].nbytes()), zmq::send_flags::none);
  // A data frame shorter than its header says.
  raw.send(zmq::buffer(header.data(), header.size()), zmq::send_flags::sndmore);
  raw.send(zmq::buffer(good[1].data(), 3), zmq::send_flags::none);
  // Too large in total, though each frame passes ZeroMQ's own limit.
  std::vector<std::byte> big(3000);
  raw.send(zmq::buffer(big.data(), big.size()), zmq::send_flags::sndmore);
  raw.send(zmq::buffer(big.data(), big.size()), zmq::send_flags::none);
  // Two tensors where one is the limit, twice: counted twice, logged once.
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      raw.send(zmq::buffer(header.data(), header.size()), zmq::send_flags::sndmore);
      raw.send(zmq::buffer(good[1].data(), good[1].nbytes()),
               j == 1 ? zmq::send_flags::none : zmq::send_flags::sndmore);
    }
  }
  // Then a good batch (one tensor: header and data).
  raw.send(zmq::buffer(header.data(), header.size()), zmq::send_flags::sndmore);
  raw.send(zmq::buffer(good[1].data(), good[1].nbytes()), zmq::send_flags::none);

  auto batch = pull.recv(5000ms);
  REQUIRE(batch.has_value());
  REQUIRE(batch->size() == 1);
  CHECK(batch->at(0).same_as(good[1]));
  const auto& counts = pull.malformed().by_kind;
  CHECK(pull.malformed().total() == 6);
  CHECK(counts.at(FormatErrorKind::kOddFrameCount) == 1);
  CHECK(counts.at(FormatErrorKind::kBadHeader) == 1);
  CHECK(counts.at(FormatErrorKind::kDataPayload) == 1);
  CHECK(counts.at(FormatErrorKind::kTooLarge) == 1);
  CHECK(counts.at(FormatErrorKind::kTooManyTensors) == 2);
  const std::map<std::string, std::uint64_t> names = pull.malformed().by_name();
  CHECK(names.at("odd frame count") == 1);
  CHECK(names.at("too many tensors") == 2);

  // The hook got one line a kind, the first saying what was wrong and where.
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "tensorcom: skipping malformed message from " + pull.describe() +
                        ": odd frame count 1: each tensor is a header and a data frame (at byte 0)"
                        " (further messages of this kind are counted, not reported)");
  CHECK(lines[4].find("2 tensors exceed the limit of 1") != std::string::npos);
}

TEST_CASE("serve() logs its rate lines through the hook") {
  TempDir dir;
  std::vector<std::string> lines;
  ConnectionOptions options;
  options.log = [&lines](std::string_view line) { lines.emplace_back(line); };
  Connection pull({ipc_url("zpull", dir, "s")});
  Connection push({ipc_url("zpush", dir, "s")}, options);
  int left = 4;
  auto next = [&]() -> std::optional<TensorList> {
    if (left == 0) return std::nullopt;
    return make_batch(left--);
  };
  CHECK(push.serve(next, 2) == 4);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].starts_with("count 8 rate "));
  CHECK(lines[1].starts_with("count 16 rate "));
  for (int i = 0; i < 4; ++i) CHECK(pull.recv(5000ms).has_value());
}

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

std::int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  REQUIRE(f != nullptr);
  long size = 0, resident = 0;
  REQUIRE(std::fscanf(f, "%ld %ld", &size, &resident) == 2);
  std::fclose(f);
  return std::int64_t{resident} * ::sysconf(_SC_PAGESIZE);
}

// Sends `frames` frames of one MiB as one message, from a raw socket.
void send_mib_frames(zmq::socket_t& raw, int frames) {
  std::vector<char> mib(1 << 20, 'm');
  for (int i = 0; i < frames; ++i) {
    raw.send(zmq::buffer(mib.data(), mib.size()), i + 1 < frames ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

}  // namespace

TEST_CASE("a receiver gives back the memory it keeps between messages") {
  if (kSanitized) return;  // the sanitizer's allocator keeps freed memory on purpose
  TempDir dir;
  constexpr std::int64_t kMiB = 1 << 20;
  SUBCASE("after dropping an oversized message") {
    ConnectionOptions options;
    options.max_message_size = 64 * kMiB;
    options.log = {};
    Connection pull({ipc_url("zpull", dir, "r")}, options);
    const std::int64_t before = resident_bytes();
    {
      zmq::context_t context;
      zmq::socket_t raw(context, zmq::socket_type::push);
      raw.connect("ipc://" + (dir.path / "r").string());
      send_mib_frames(raw, 300);
      CHECK_FALSE(pull.recv(5000ms).has_value());
    }
    CHECK(pull.malformed().by_kind.at(FormatErrorKind::kTooLarge) == 1);
    CHECK(resident_bytes() - before < 100 * kMiB);
  }
  SUBCASE("when it has waited a second for the next message") {
    Connection pull({ipc_url("zpull", dir, "i")});
    const std::int64_t before = resident_bytes();
    {
      zmq::context_t context;
      zmq::socket_t raw(context, zmq::socket_type::push);
      raw.connect("ipc://" + (dir.path / "i").string());
      // One valid 300 MiB tensor: header frame, then data.
      TensorList big{Tensor::zeros(DType::kUInt8, {300 * kMiB})};
      std::vector<std::byte> header(header_size(big[0]));
      write_header(big[0], header);
      raw.send(zmq::buffer(header.data(), header.size()), zmq::send_flags::sndmore);
      raw.send(zmq::buffer(big[0].data(), big[0].nbytes()), zmq::send_flags::none);
      // 300 MiB through a socket: seconds on a loaded 2-core machine.
      auto got = pull.recv(30000ms);
      REQUIRE(got.has_value());
      CHECK((*got)[0].nbytes() == 300 * kMiB);
    }
    CHECK_FALSE(pull.recv(1500ms).has_value());  // idle: the kept memory goes back
    CHECK(resident_bytes() - before < 100 * kMiB);
  }
}

TEST_CASE("closing, more URLs and framing per send") {
  TempDir dir;
  ConnectionOptions receive_options;
  receive_options.timeout = 5000ms;
  const auto elapsed = [](auto start) { return std::chrono::steady_clock::now() - start; };

  SUBCASE("a sender that never had a peer closes at once, despite its linger") {
    Connection push({"zpush://127.0.0.1:9"});  // nothing listens: never connects
    push.send(make_batch(1));
    const auto start = std::chrono::steady_clock::now();
    push.close();
    CHECK(elapsed(start) < 500ms);  // the linger is 2 s
    CHECK(push.closed());
    CHECK(push.stats().batches() == 1);  // still readable
    CHECK_THROWS_AS(push.send(make_batch(2)), TransportError);
    push.close();  // idempotent
  }
  SUBCASE("a subscriber that never found its publisher closes at once") {
    Connection sub({"zsub://127.0.0.1:9"});
    CHECK_FALSE(sub.recv(50ms).has_value());
    CHECK(sub.stats().blocked_seconds() >= 0.04);
    const auto start = std::chrono::steady_clock::now();
    sub.close();
    CHECK(elapsed(start) < 500ms);
    CHECK_THROWS_AS((void)sub.recv(10ms), TransportError);
  }
  SUBCASE("batches queued to a peer still get their linger") {
    ConnectionOptions small = receive_options;
    small.receive_high_water_mark = 1;
    Connection pull({ipc_url("zpull", dir, "l")}, small);
    Connection push({ipc_url("zpush", dir, "l")});
    push.send(make_batch(0));
    REQUIRE(pull.recv(5000ms).has_value());
    const Tensor big = Tensor::zeros(DType::kUInt8, {16 << 20});
    for (int i = 0; i < 4; ++i) push.send(TensorList{big, Tensor::zeros(DType::kInt32, {1})});
    std::thread closer([&] { push.close(); });
    std::this_thread::sleep_for(200ms);  // nothing read yet: the batches wait in queues
    int received = 0;
    while (received < 4 && pull.recv(5000ms)) ++received;
    closer.join();
    CHECK(received == 4);
  }
  SUBCASE("connect() adds URLs of the same kind to the socket") {
    Connection pull({ipc_url("zpull", dir, "c1")}, receive_options);
    const std::vector<std::string> more{ipc_url("zpull", dir, "c{2..3}")};
    pull.connect(more);
    CHECK(pull.endpoints().size() == 3);
    Connection push({ipc_url("zpush", dir, "c3")});
    push.send(make_batch(7));
    auto batch = pull.recv(5000ms);
    REQUIRE(batch.has_value());
    CHECK(id_of(*batch) == 7);
    const std::vector<std::string> other{"zpush://127.0.0.1:1"};
    CHECK_THROWS_AS(pull.connect(other), UrlError);
  }
  SUBCASE("send() may pick the framing of each batch") {
    Connection pull({"zpull://127.0.0.1:0"}, receive_options);
    zmq::context_t context;
    zmq::socket_t peer(context, zmq::socket_type::pull);
    peer.set(zmq::sockopt::linger, 0);
    peer.set(zmq::sockopt::rcvtimeo, 5000);
    peer.bind("tcp://127.0.0.1:*");
    Connection push({"zpush://" + host_port(peer.get(zmq::sockopt::last_endpoint))});
    for (Framing framing : {Framing::kSingleBuffer, Framing::kMultipart}) {
      push.send(make_batch(1), framing);
      std::vector<zmq::message_t> frames;
      zmq::message_t frame;
      do {
        REQUIRE(peer.recv(frame));
        frames.push_back(std::move(frame));
      } while (frames.back().more());
      CHECK(frames.size() == (framing == Framing::kSingleBuffer ? 1u : 4u));
    }
  }
}
