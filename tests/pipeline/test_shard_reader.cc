// Reading webdataset shards: grouping, compression, truncation, pipes.
#include <doctest/doctest.h>

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <fstream>

#include "shard_reader.h"
#include "tensorcom/error.h"
#include "test_support.h"

using namespace tensorcom;
using namespace tensorcom::pipeline;
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

std::string text(const ByteBuffer& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::vector<RawSample> read_all(ShardReader& reader) {
  std::vector<RawSample> out;
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
};

}  // namespace

TEST_CASE("member names split as webdataset splits them") {
  CHECK(split_member_name("a/b.c/n01.tar.jpg") == std::pair<std::string, std::string>{"a/b.c/n01", "tar.jpg"});
  CHECK(split_member_name("x.cls") == std::pair<std::string, std::string>{"x", "cls"});
  CHECK(split_member_name("dir/noext") == std::pair<std::string, std::string>{"dir/noext", ""});
  CHECK(split_member_name(".hidden") == std::pair<std::string, std::string>{"", "hidden"});
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
        CHECK(text(samples[0].image) == "JPEG-A");
        CHECK(samples[0].label == "3");
        CHECK(samples[0].shard == name);
        CHECK(samples[1].key == "train/n01/b");
        CHECK(samples[1].image_extension == "png");
        CHECK(samples[1].label == "4\n");
        CHECK(samples[2].key == "train/d.e/c");
        CHECK(samples[2].image_extension.empty());  // "x.jpg" is not "jpg", as in webdataset's to_tuple
        CHECK(samples[2].image.empty());
        CHECK(samples[3].key == "train/n02/meta");
        CHECK_FALSE(samples[3].label.has_value());
        CHECK_FALSE(reader.error().has_value());
      }
    }
  }
  SUBCASE("a truncated shard returns its complete samples and says why it ended") {
    std::vector<Member> members;
    for (int i = 0; i < 6; ++i) {
      members.push_back({"s" + std::to_string(i) + ".jpg", std::string(3000, 'x')});
      members.push_back({"s" + std::to_string(i) + ".cls", std::to_string(i)});
    }
    write_tar(tar, members);
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
    std::vector<Member> members;
    for (int i = 0; i < 6; ++i) {
      members.push_back({"s" + std::to_string(i) + ".jpg", std::string(3000, 'x')});
      members.push_back({"s" + std::to_string(i) + ".cls", std::to_string(i)});
    }
    write_tar(tar, members);
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
  SUBCASE("oversized members are skipped") {
    write_tar(tar, kMembers);
    ShardReaderOptions options;
    options.max_member_bytes = 5;
    ShardReader reader(tar.string(), options);
    auto samples = read_all(reader);
    REQUIRE(samples.size() == 4);
    CHECK(samples[0].image.empty());  // 6 bytes
    CHECK(samples[0].oversized_image == 6);  // so that it is skipped as too large, not as imageless
    CHECK(samples[0].label == "3");
    CHECK(samples[1].oversized_image == 0);
    CHECK(text(samples[1].image) == "PNG-B");  // 5 bytes
    CHECK(reader.oversized_members() == 1);
  }
}
