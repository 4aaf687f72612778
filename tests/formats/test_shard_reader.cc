// Reading webdataset shards: grouping, compression, truncation, pipes, URLs
// (what needs an HTTP server is in tests/http/).
#include <doctest/doctest.h>

#include <archive.h>
#include <archive_entry.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tensorcom/codec/error.h"
#include "tensorcom/formats/shard_reader.h"
#include "tensorcom/formats/webdataset.h"
#include "test_support.h"

using namespace tensorcom;
using namespace tensorcom::formats;
using tensorcom::testing::TempDir;
namespace fs = std::filesystem;

namespace {

struct Member {
  std::string name;
  std::string data;
  unsigned type = AE_IFREG;
};

// Writes a tar (gzip-compressed if asked) of the members, in order.
void write_tar(const fs::path& path, const std::vector<Member>& members, bool gzip = false) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (gzip) archive_write_add_filter_gzip(a);
  REQUIRE(archive_write_open_filename(a, path.c_str()) == ARCHIVE_OK);
  for (const Member& m : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_filetype(e, m.type);
    archive_entry_set_perm(e, 0644);
    if (m.type == AE_IFLNK) archive_entry_set_symlink(e, "target");
    archive_entry_set_size(e, m.type == AE_IFREG ? static_cast<la_int64_t>(m.data.size()) : 0);
    archive_write_header(a, e);
    if (m.type == AE_IFREG) archive_write_data(a, m.data.data(), m.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

std::string text(const ByteBuffer& bytes) { return {reinterpret_cast<const char*>(bytes.data()), bytes.size()}; }

std::vector<ShardSample> read_all(ShardReader& reader) {
  std::vector<ShardSample> out;
  while (auto s = reader.next()) out.push_back(std::move(*s));
  return out;
}

const std::vector<Member> kMembers = {
    {"train/", "", AE_IFDIR},
    {"train/n01/a.jpg", "JPEG-A"},
    {"train/n01/a.cls", "3"},
    {"train/n01/a.json", "{}"},
    {"train/link.jpg", "", AE_IFLNK},
    {"train/n01/b.png", "PNG-B"},
    {"train/n01/b.cls", "4\n"},
    {"train/d.e/c.x.jpg", "JPEG-C"},
    {"train/d.e/c.x.cls", "5"},
    {"train/n02/meta.txt", "no image here"},
    {"train/n02/README", "no key: passed over"},
    {"train/n02/meta.cls", "9"},
};

// Six samples s0..s5, each a 3000-byte "jpg" and its "cls".
std::vector<Member> six_samples() {
  std::vector<Member> members;
  for (int i = 0; i < 6; ++i) {
    members.push_back({"s" + std::to_string(i) + ".jpg", std::string(3000, 'x')});
    members.push_back({"s" + std::to_string(i) + ".cls", std::to_string(i)});
  }
  return members;
}

// The text of the member with this extension, or nothing.
std::optional<std::string> member(const ShardSample& sample, const std::string& extension) {
  for (const ShardMember& m : sample.members) {
    if (m.extension == extension) return text(m.data);
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("member names split as webdataset splits them") {
  auto split = [](std::string_view path) {
    auto name = split_member_name(path);
    return name ? std::pair(name->key, name->extension) : std::pair(std::string("-"), std::string("-"));
  };
  CHECK(split("a/b.c/n01.tar.jpg") == std::pair<std::string, std::string>{"a/b.c/n01", "tar.jpg"});
  CHECK(split("x.cls") == std::pair<std::string, std::string>{"x", "cls"});
  CHECK(split("x.JPG") == std::pair<std::string, std::string>{"x", "jpg"});    // lowercased, as webdataset does
  CHECK(split("dir/noext") == std::pair<std::string, std::string>{"-", "-"});  // no key: passed over
  CHECK(split(".hidden") == std::pair<std::string, std::string>{"-", "-"});
  CHECK(split("d/.hidden.jpg") == std::pair<std::string, std::string>{"-", "-"});
  CHECK(split("a.b/") == std::pair<std::string, std::string>{"-", "-"});
  CHECK(split("d/n.") == std::pair<std::string, std::string>{"-", "-"});  // an empty extension: found by fuzz_shard
  CHECK(split("d/n.x.") == std::pair<std::string, std::string>{"d/n", "x."});
}

TEST_CASE("image extensions are torchvision's, in any case") {
  for (const char* yes : {"jpg", "JPEG", "png", "ppm", "bmp", "pgm", "tif", "TIFF", "webp"})
    CHECK(is_image_extension(yes));
  for (const char* no : {"", "cls", "x.jpg", "jpgg", "gif", "json", "jp"}) CHECK_FALSE(is_image_extension(no));
}

TEST_CASE("webdataset keys from file stems") {
  CHECK(webdataset_key("a.b/c.d.e") == "a.b/c_d_e");
  CHECK(webdataset_key("plain") == "plain");
}

TEST_CASE("shard reading") {
  TempDir dir;
  fs::path tar = dir.path / "shard.tar";

  SUBCASE("grouping, plain and gzip, file: prefix") {
    for (bool gzip : {false, true}) {
      CAPTURE(gzip);
      write_tar(tar, kMembers, gzip);
      for (const std::string& name : {tar.string(), "file:" + tar.string()}) {
        ShardReader reader(name);
        auto samples = read_all(reader);
        REQUIRE(samples.size() == 4);
        CHECK(samples[0].key == "train/n01/a");
        CHECK(member(samples[0], "jpg") == "JPEG-A");
        CHECK(member(samples[0], "cls") == "3");
        CHECK(member(samples[0], "json") == "{}");
        CHECK(samples[0].members[0].name == "train/n01/a.jpg");
        CHECK(samples[1].key == "train/n01/b");
        CHECK(member(samples[1], "png") == "PNG-B");
        CHECK(member(samples[1], "cls") == "4\n");
        CHECK(samples[2].key == "train/d.e/c");
        CHECK(member(samples[2], "x.jpg") == "JPEG-C");
        // A keyless member between two of one key does not split the sample.
        CHECK(samples[3].key == "train/n02/meta");
        CHECK(member(samples[3], "txt") == "no image here");
        CHECK(member(samples[3], "cls") == "9");
        CHECK(reader.keyless_members() == 1 + 2);  // README; the folder and the link are no files
        CHECK(reader.shard() == name);
        CHECK_FALSE(reader.error().has_value());
      }
    }
  }
  SUBCASE("a truncated shard returns its complete samples and says why it ended") {
    write_tar(tar, six_samples());
    fs::resize_file(tar, 11000);  // inside the third sample's image (its data spans 9728..12800)
    ShardReader reader(tar.string());
    auto samples = read_all(reader);
    CHECK(samples.size() == 2);
    REQUIRE(reader.error().has_value());
    CHECK(reader.error()->find("truncated") != std::string::npos);
  }
  SUBCASE("a missing shard is an IoError naming it") {
    CHECK_THROWS_WITH_AS(ShardReader((dir.path / "nope.tar").string()), doctest::Contains("nope.tar"), IoError);
  }
  SUBCASE("garbage is not a shard") {
    std::ofstream(tar) << std::string(5000, 'z');
    bool failed = false;
    try {
      ShardReader reader(tar.string());
      CHECK(read_all(reader).empty());
      failed = reader.error().has_value();
    } catch (const IoError&) {
      failed = true;
    }
    CHECK(failed);
  }
  SUBCASE("a gzip shard without its trailer is refused with a message") {
    // libarchive fails to open it and gives no error text (found by fuzz_shard).
    write_tar(tar, kMembers, true);
    fs::resize_file(tar, fs::file_size(tar) - 8);
    std::string message;
    try {
      ShardReader reader(tar.string());
      (void)read_all(reader);
      message = reader.error().value_or("");
    } catch (const IoError& e) {
      message = e.what();
    }
    CAPTURE(message);
    CHECK(message.find("shard.tar") != std::string::npos);
    CHECK(message.find("libarchive gave no reason") != std::string::npos);
  }
  SUBCASE("pipe: reads a command's output") {
    write_tar(tar, kMembers);
    ShardReader reader("pipe:cat '" + tar.string() + "'");
    CHECK(read_all(reader).size() == 4);
    CHECK_FALSE(reader.error().has_value());
  }
  SUBCASE("a command that fails after a complete archive: its samples, and its status") {
    write_tar(tar, kMembers);
    ShardReader reader("pipe:cat '" + tar.string() + "'; exit 3");
    CHECK(read_all(reader).size() == 4);
    REQUIRE(reader.error().has_value());
    CHECK(reader.error()->find("exited with status 3") != std::string::npos);
  }
  SUBCASE("a command that breaks off is retried, and nothing is repeated") {
    write_tar(tar, six_samples());
    ShardReader reader("pipe:head -c 11000 '" + tar.string() + "'; exit 3");
    auto samples = read_all(reader);
    REQUIRE(samples.size() == 2);
    CHECK(samples[1].key == "s1");
    REQUIRE(reader.error().has_value());
    CHECK(reader.error()->find("exited with status 3") != std::string::npos);
    CHECK(reader.error()->find("tried 3 times") != std::string::npos);
  }
  SUBCASE("a command with no output") {
    ShardReader reader("pipe:exit 7");
    CHECK(read_all(reader).empty());
    REQUIRE(reader.error().has_value());
    CHECK(reader.error()->find("exited with status 7") != std::string::npos);
  }
  SUBCASE("oversized members are listed unread") {
    write_tar(tar, kMembers);
    ShardReaderOptions options;
    options.max_member_bytes = 5;
    ShardReader reader(tar.string(), options);
    auto samples = read_all(reader);
    REQUIRE(samples.size() == 4);
    const ShardMember& image = samples[0].members[0];
    CHECK(image.oversized);  // 6 bytes
    CHECK(image.size == 6);
    CHECK(image.data.empty());
    CHECK(member(samples[0], "cls") == "3");
    CHECK(member(samples[1], "png") == "PNG-B");  // 5 bytes
    CHECK(reader.oversized_members() == 3);       // JPEG-A, JPEG-C and the .txt
  }
  SUBCASE("only wanted members are read") {
    write_tar(tar, kMembers);
    ShardReaderOptions options;
    options.wanted = [](const ShardSample& so_far, std::string_view extension) {
      return extension == "cls" && so_far.members.empty();
    };
    ShardReader reader(tar.string(), options);
    auto samples = read_all(reader);
    REQUIRE(samples.size() == 4);
    for (const ShardSample& sample : samples) CHECK(sample.members.size() <= 1);
    CHECK(member(samples[0], "cls") == "3");
    CHECK(samples[2].members.empty());
  }
  SUBCASE("a member declared larger than the shard costs only what is there") {
    // A 3000-byte member cut after 500 bytes: the reader must fail on the
    // data, not allocate what a hostile header declares.
    write_tar(tar, {{"big.jpg", std::string(3000, 'x')}});
    fs::resize_file(tar, 512 + 500);
    ShardReader reader(tar.string());
    CHECK(read_all(reader).empty());
    CHECK(reader.error().has_value());
  }
}

TEST_CASE("http(s) shards: which names are URLs, and the back-off between tries") {
  CHECK(is_http_shard("http://host/a.tar"));
  CHECK(is_http_shard("HTTPS://host/a.tar"));
  CHECK_FALSE(is_http_shard("pipe:curl -s http://host/a.tar"));
  CHECK_FALSE(is_http_shard("file:http://a.tar"));
  CHECK_FALSE(is_http_shard("httpdata/a.tar"));

  using std::chrono::milliseconds;
  HttpShardOptions http;
  http.first_retry_delay = milliseconds(1000);
  http.max_retry_delay = milliseconds(5000);
  CHECK(http.retry_delay(1) == milliseconds(1000));
  CHECK(http.retry_delay(2) == milliseconds(2000));
  CHECK(http.retry_delay(3) == milliseconds(4000));
  CHECK(http.retry_delay(4) == milliseconds(5000));     // capped
  CHECK(http.retry_delay(1000) == milliseconds(5000));  // no overflow however many
  http.first_retry_delay = milliseconds(0);
  CHECK(http.retry_delay(5) == milliseconds(0));
}

namespace {

// A URL on a loopback port that was free a moment ago: connecting to it is
// refused at once.
std::string refused_url() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  REQUIRE(bound);
  return "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/a.tar";
}

}  // namespace

TEST_CASE("an http(s) shard that cannot be fetched ends the shard, never throws") {
  ShardReaderOptions options;
  options.http.attempts = 2;
  options.http.first_retry_delay = std::chrono::milliseconds(10);
  const std::string url = refused_url();
  ShardReader reader(url, options);
  CHECK_FALSE(reader.next().has_value());
  REQUIRE(reader.error().has_value());
  CHECK(reader.error()->starts_with(url + ": "));
  CHECK(reader.error()->find("(tried 2 times)") != std::string::npos);
}

TEST_CASE("a cancelled reader stops during the back-off wait") {
  ShardReaderOptions options;
  options.http.attempts = 5;
  options.http.first_retry_delay = std::chrono::milliseconds(60000);
  int polls = 0;
  options.cancelled = [&polls] { return ++polls > 3; };
  const auto start = std::chrono::steady_clock::now();
  ShardReader reader(refused_url(), options);
  CHECK_FALSE(reader.next().has_value());
  CHECK(reader.error() == std::optional<std::string>("stopped"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("a member keep() refuses is read no further than its head") {
  TempDir dir;
  const fs::path tar = dir.path / "heads.tar";
  const std::string big(3 * kMemberHeadBytes + 5, 'z');
  write_tar(tar, {{"a.jpg", big}, {"a.cls", "1"}, {"b.jpg", "tiny"}, {"b.txt", big}}, true);
  ShardReaderOptions options;
  std::vector<std::size_t> shown;
  options.keep = [&](std::string_view extension, std::span<const std::byte> head) {
    shown.push_back(head.size());
    return extension != "jpg";
  };
  ShardReader reader(tar.string(), options);
  auto samples = read_all(reader);
  REQUIRE(samples.size() == 2);
  CHECK(member(samples[0], "jpg") == big.substr(0, kMemberHeadBytes));  // the head only
  CHECK(member(samples[0], "cls") == "1");
  CHECK(member(samples[1], "jpg") == "tiny");  // smaller than a head: all of it
  CHECK(member(samples[1], "txt") == big);     // kept: read whole after its head
  CHECK(shown == std::vector<std::size_t>{kMemberHeadBytes, 1, 4, kMemberHeadBytes});
  CHECK_FALSE(reader.error().has_value());
}

TEST_CASE("members of a plain local tar are listed with where their bytes lie; compressed or piped ones are not") {
  TempDir dir;
  const fs::path tar = dir.path / "places.tar";
  // A long name takes a pax header of its own: the offset is past it.
  const std::string long_name = std::string(150, 'n') + ".jpg";
  write_tar(tar, {{"a.jpg", "AAAA"}, {"a.cls", "1"}, {long_name, "LONG-NAMED"}, {"b.jpg", std::string(700, 'b')}});
  ShardReader reader(tar.string());
  const auto samples = read_all(reader);
  REQUIRE(samples.size() == 3);
  for (const ShardSample& sample : samples) {
    for (const ShardMember& m : sample.members) {
      CAPTURE(m.name);
      REQUIRE(m.offset);
      CHECK(read_file_range(tar, *m.offset, m.size) == m.data);
    }
  }
  ShardReader file_url("file:" + tar.string());
  CHECK(read_all(file_url)[1].members[0].offset == samples[1].members[0].offset);

  write_tar(dir.path / "places.tar.gz", {{"a.jpg", "AAAA"}}, true);
  ShardReader compressed((dir.path / "places.tar.gz").string());
  CHECK_FALSE(read_all(compressed)[0].members[0].offset);
  ShardReader piped("pipe:cat " + tar.string());
  CHECK_FALSE(read_all(piped)[0].members[0].offset);
}

TEST_CASE("list_only_with_offset: members without a known place are read whatever listed_only says") {
  TempDir dir;
  for (bool gzip : {false, true}) {
    const fs::path tar = dir.path / (gzip ? "l.tar.gz" : "l.tar");
    write_tar(tar, six_samples(), gzip);
    ShardReaderOptions options;
    options.listed_only = [](const ShardSample&, std::string_view extension) { return extension == "jpg"; };
    options.list_only_with_offset = true;
    ShardReader reader(tar.string(), options);
    const auto samples = read_all(reader);
    REQUIRE(samples.size() == 6);
    const ShardMember& jpg = samples[3].members[0];
    CHECK(jpg.size == 3000);
    CHECK(jpg.unread == !gzip);
    CHECK(jpg.data.size() == (gzip ? 3000u : 0u));
  }
}

TEST_CASE("read_file_range: a range past the end of the file is an error naming it") {
  TempDir dir;
  const fs::path file = dir.path / "short.bin";
  std::ofstream(file) << "0123456789";
  CHECK(text(read_file_range(file, 2, 5)) == "23456");
  CHECK_THROWS_WITH_AS((void)read_file_range(file, 8, 5), doctest::Contains("short.bin"), IoError);
  CHECK_THROWS_WITH_AS((void)read_file_range(file, ~std::uint64_t{0}, 2), doctest::Contains("short.bin"), IoError);
  CHECK_THROWS_AS((void)read_file_range(dir.path, 0, 1), IoError);  // a folder
}
