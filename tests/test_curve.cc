// CURVE certificates and CURVE-secured Connections over real sockets.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <fstream>
#include <string>
#include <thread>

#include "tensorcom/transport/connection.h"
#include "tensorcom/transport/connection_controls.h"
#include "tensorcom/transport/curve.h"
#include "test_support.h"

using namespace tensorcom;
using namespace std::chrono_literals;
using tensorcom::testing::TempDir;

namespace {

void write_text(const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; }

mode_t mode_of(const std::filesystem::path& path) {
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  return info.st_mode & 0777;
}

TensorList batch_of(std::int32_t id) {
  Tensor labels = Tensor::zeros(DType::kInt32, {1});
  labels.values<std::int32_t>()[0] = id;
  return {labels};
}

std::int32_t id_of(const TensorList& batch) { return batch.at(0).values<std::int32_t>()[0]; }

CurveSecurity client_of(const CurveKeyPair& own, const CurveKeyPair& server) {
  return {own, server.public_key, std::nullopt};
}

}  // namespace

TEST_CASE("CURVE certificates") {
  TempDir dir;
  const CurveKeyPair keys = generate_curve_keypair();
  CHECK(keys.public_key.size() == 40);
  CHECK(keys.secret_key.size() == 40);
  CHECK(generate_curve_keypair().public_key != keys.public_key);

  SUBCASE("written as a public and a private file, and read back") {
    write_curve_certificates(dir.path / "server", keys);
    CHECK(mode_of(dir.path / "server_secret") == 0600);
    CHECK(mode_of(dir.path / "server") == 0644);
    const CurveKeyPair public_only = read_curve_certificate(dir.path / "server");
    CHECK(public_only.public_key == keys.public_key);
    CHECK(public_only.secret_key.empty());
    const CurveKeyPair both = read_curve_secret_certificate(dir.path / "server_secret");
    CHECK(both.public_key == keys.public_key);
    CHECK(both.secret_key == keys.secret_key);
    CHECK_THROWS_AS(write_curve_certificates(dir.path / "server", keys), IoError);  // never overwritten
  }
  SUBCASE("CZMQ's zcert text, comments, metadata and single quotes included") {
    write_text(dir.path / "czmq",
               "#   ****  Generated on 2026-01-01 by CZMQ  ****\n"
               "#   ZeroMQ CURVE Public Certificate\n\n"
               "metadata\n    name = \"trainer-7\"\n"
               "curve\n    public-key = '" +
                   keys.public_key + "'\n");
    CHECK(read_curve_certificate(dir.path / "czmq").public_key == keys.public_key);
  }
  SUBCASE("what is not a certificate is refused, naming the file and line") {
    write_text(dir.path / "bad", "curve\n    public-key = \"short\"\n");
    CHECK_THROWS_WITH_AS((void)read_curve_certificate(dir.path / "bad"), doctest::Contains("bad: line 2: public-key"),
                         FormatError);
    write_text(dir.path / "empty", "metadata\n");
    CHECK_THROWS_WITH_AS((void)read_curve_certificate(dir.path / "empty"), doctest::Contains("no curve public-key"),
                         FormatError);
    CHECK_THROWS_AS((void)read_curve_certificate(dir.path / "missing"), IoError);
  }
  SUBCASE("a secret certificate must hold the secret and be private") {
    write_curve_certificates(dir.path / "c", keys);
    CHECK_THROWS_WITH_AS((void)read_curve_secret_certificate(dir.path / "c"), doctest::Contains("no secret key"),
                         ArgumentError);
    ::chmod((dir.path / "c_secret").c_str(), 0644);
    CHECK_THROWS_WITH_AS((void)read_curve_secret_certificate(dir.path / "c_secret"),
                         doctest::Contains("readable by others"), ArgumentError);
  }
  SUBCASE("an allow-list folder yields its public keys, not its secrets") {
    std::filesystem::create_directory(dir.path / "allowed");
    const CurveKeyPair other = generate_curve_keypair();
    write_curve_certificates(dir.path / "allowed" / "a", keys);
    write_curve_certificates(dir.path / "allowed" / "b", other);
    auto listed = read_curve_public_keys(dir.path / "allowed");
    std::sort(listed.begin(), listed.end());
    std::vector<std::string> expected{keys.public_key, other.public_key};
    std::sort(expected.begin(), expected.end());
    CHECK(listed == expected);
  }
}

TEST_CASE("CURVE connections: only allowed clients receive, and the server keeps serving them") {
  TempDir dir;
  const CurveKeyPair server = generate_curve_keypair();
  const CurveKeyPair allowed = generate_curve_keypair();
  const CurveKeyPair unknown = generate_curve_keypair();
  const CurveKeyPair impostor = generate_curve_keypair();  // what a client wrongly takes for the server
  const std::string address = "ipc://" + (dir.path / "s").string();

  std::vector<std::string> lines;
  ConnectionOptions server_options;
  server_options.curve = CurveSecurity{server, "", std::vector<std::string>{allowed.public_key}};
  server_options.log = [&lines](std::string_view line) { lines.emplace_back(line); };
  server_options.linger = 0ms;
  Connection push({"zrpush+" + address}, server_options);  // binds

  // The clients connect (zrpull).
  auto connect_url = [&](const std::string& scheme) { return scheme + "+" + address; };
  ConnectionOptions unknown_options, plain_options, impostor_options, allowed_options;
  unknown_options.curve = client_of(unknown, server);
  impostor_options.curve = client_of(allowed, impostor);
  allowed_options.curve = client_of(allowed, server);
  Connection by_unknown({connect_url("zrpull")}, unknown_options);
  Connection by_plain({connect_url("zrpull")}, plain_options);
  Connection by_impostor({connect_url("zrpull")}, impostor_options);
  std::this_thread::sleep_for(300ms);  // their handshakes fail first
  Connection by_allowed({connect_url("zrpull")}, allowed_options);

  for (int i = 0; i < 10; ++i) push.send(batch_of(i));  // PUSH waits for a peer that passed
  for (int i = 0; i < 10; ++i) {
    auto got = by_allowed.recv(5000ms);
    REQUIRE(got.has_value());
    CHECK(id_of(*got) == i);  // every batch, in order: no refused peer took a share
  }
  CHECK_FALSE(by_unknown.recv(200ms).has_value());
  CHECK_FALSE(by_plain.recv(10ms).has_value());
  CHECK_FALSE(by_impostor.recv(10ms).has_value());
  CHECK(refused_peers(push) >= 1);
  push.send(batch_of(10));  // logs the refusals
  bool named_the_key = false;
  for (const auto& line : lines) named_the_key |= line.find(unknown.public_key) != std::string::npos;
  CHECK(named_the_key);
  CHECK(by_allowed.recv(5000ms).has_value());
}
