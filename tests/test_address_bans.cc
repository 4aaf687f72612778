// AddressBans (libtensorcom/src/address_bans.h): flooders' addresses refused
// for kBanTime, not longer for retrying, longer for flooding again, bounded
// in number; and peer_address, which must give addresses as ZAP's requests
// do.
#include "address_bans.h"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

using tensorcom::detail::AddressBans;
using tensorcom::detail::peer_address;

namespace {

const AddressBans::Clock::time_point kStart{};

}  // namespace

TEST_CASE("a banned address is refused for the ban time, and retries do not extend it") {
  AddressBans bans;
  bans.ban("10.0.0.7", kStart);
  CHECK(bans.bans() == 1);
  CHECK(bans.refuses("10.0.0.7", kStart));
  CHECK_FALSE(bans.refuses("10.0.0.8", kStart));
  for (int tenth = 1; tenth < 100; ++tenth) {
    CHECK(bans.refuses("10.0.0.7", kStart + std::chrono::milliseconds(100 * tenth)));
  }
  CHECK_FALSE(bans.refuses("10.0.0.7", kStart + AddressBans::kBanTime));
  CHECK(bans.refused() == 100);
}

TEST_CASE("a flood during a ban changes nothing; a flood after it doubles the next, up to the longest") {
  using std::chrono::seconds;
  AddressBans bans;
  bans.ban("10.0.0.7", kStart);
  bans.ban("10.0.0.7", kStart + seconds(5));  // another connection made before the ban
  CHECK(bans.bans() == 1);
  CHECK(bans.refuses("10.0.0.7", kStart + seconds(9)));
  CHECK_FALSE(bans.refuses("10.0.0.7", kStart + seconds(10)));

  auto now = kStart + seconds(20);
  for (const int length : {20, 40, 80, 160, 160}) {
    CAPTURE(length);
    bans.ban("10.0.0.7", now);
    CHECK(bans.refuses("10.0.0.7", now + seconds(length) - std::chrono::milliseconds(1)));
    CHECK_FALSE(bans.refuses("10.0.0.7", now + seconds(length)));
    now += seconds(length + 1);
  }
  CHECK(bans.bans() == 6);
}

TEST_CASE("an address that stays quiet long enough is forgiven: its next ban is the first again") {
  AddressBans bans;
  bans.ban("10.0.0.7", kStart);
  const auto forgiven = kStart + AddressBans::kBanTime + AddressBans::kForgetAfter;
  bans.ban("10.0.0.8", forgiven);  // any ban forgets the forgiven
  bans.ban("10.0.0.7", forgiven);
  CHECK(bans.refuses("10.0.0.7", forgiven + AddressBans::kBanTime - std::chrono::milliseconds(1)));
  CHECK_FALSE(bans.refuses("10.0.0.7", forgiven + AddressBans::kBanTime));
}

TEST_CASE("ipc peers (no address) are never banned; IPv4-mapped IPv6 is IPv4") {
  AddressBans bans;
  bans.ban("", kStart);
  CHECK_FALSE(bans.refuses("", kStart));
  CHECK(bans.bans() == 0);
  bans.ban("::ffff:192.168.1.2", kStart);
  CHECK(bans.refuses("192.168.1.2", kStart));
  CHECK(bans.refuses("::ffff:192.168.1.2", kStart));
}

TEST_CASE("past the most addresses, a ban replaces the one ending first") {
  AddressBans bans;
  for (std::size_t i = 0; i < AddressBans::kMaxAddresses; ++i) {
    bans.ban("a" + std::to_string(i), kStart + std::chrono::milliseconds(i));
  }
  bans.ban("newcomer", kStart + std::chrono::seconds(1));
  CHECK(bans.refuses("newcomer", kStart + std::chrono::seconds(1)));
  CHECK_FALSE(bans.refuses("a0", kStart + std::chrono::seconds(1)));
  CHECK(bans.refuses("a1", kStart + std::chrono::seconds(1)));
}

TEST_CASE("peer_address gives a TCP peer's numeric address, and nothing for a unix socket") {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener, 1) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) == 0);
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  const int accepted = ::accept(listener, nullptr, nullptr);
  REQUIRE(accepted >= 0);
  CHECK(peer_address(accepted) == "127.0.0.1");
  ::close(accepted);
  ::close(client);
  ::close(listener);

  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
  CHECK(peer_address(pair[0]).empty());
  ::close(pair[0]);
  ::close(pair[1]);
  CHECK(peer_address(-1).empty());
}
