#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sample_source.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/formats/tar_encoder.h"

using namespace tensorcom;
using namespace tensorcom::pipeline;
namespace fs = std::filesystem;

namespace {

// A scratch folder, removed with everything in it.
struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tensorcom-source-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

std::span<const std::byte> bytes_of(const std::string& text) { return std::as_bytes(std::span(text)); }

void write_file(const fs::path& path, std::span<const std::byte> data) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
}

// A shard of webdataset samples: a.jpg + a.cls, b.png + b.cls (b's image
// over the size limit used below), c.cls alone.
fs::path write_shard(const fs::path& dir) {
  formats::TarEncoder encoder(0);
  const std::string small = "JPEGDATA", large(100, 'x'), one = "1", two = " 2\n", three = "3";
  std::vector<std::byte> tar;
  for (const auto& group : {std::vector<formats::TarMember>{{"a.jpg", bytes_of(small)}, {"a.cls", bytes_of(one)}},
                            std::vector<formats::TarMember>{{"b.png", bytes_of(large)}, {"b.cls", bytes_of(two)}},
                            std::vector<formats::TarMember>{{"c.cls", bytes_of(three)}}}) {
    const auto encoded = encoder.encode(group);
    tar.insert(tar.end(), encoded.begin(), encoded.end());
  }
  tar.resize(tar.size() + formats::kTarEndSize);
  const fs::path path = dir / "shard-0.tar";
  write_file(path, tar);
  return path;
}

std::vector<RawSample> read_all(SampleSource& source, std::size_t unit, std::optional<std::string>* ended = nullptr,
                                bool images_later = false) {
  std::vector<RawSample> out;
  auto result = source.read(
      unit,
      [&](RawSample s) {
        out.push_back(std::move(s));
        return true;
      },
      images_later);
  if (ended) *ended = result;
  return out;
}

}  // namespace

TEST_CASE("shard samples: the image, its label text, and what was passed over") {
  TempDir dir;
  const fs::path shard = write_shard(dir.path);
  auto source = shard_source({shard.string()}, 50);
  CHECK(source->units() == 1);
  CHECK(std::string(source->unit_name()) == "shards");
  CHECK(source->unit_label(0) == shard.string());
  std::optional<std::string> ended;
  const auto samples = read_all(*source, 0, &ended);
  CHECK_FALSE(ended);
  REQUIRE(samples.size() == 3);
  CHECK(samples[0].key == "a");
  CHECK(samples[0].shard == shard.string());
  REQUIRE(samples[0].image);
  CHECK(samples[0].image->size() == 8);
  CHECK(samples[0].label == "1");
  CHECK(samples[1].key == "b");
  CHECK_FALSE(samples[1].image);  // over 50 bytes: not read
  CHECK(samples[1].oversized_image == 100);
  CHECK(samples[1].label == " 2\n");
  CHECK(samples[2].key == "c");
  CHECK_FALSE(samples[2].image);
}

TEST_CASE("images read later: listed where they lie, read back whole, weighed as when read") {
  TempDir dir;
  // x.jpg starts as a JPEG does; a.jpg of write_shard() is no image.
  formats::TarEncoder encoder(0);
  std::string jpeg = "\xFF\xD8\xFF\xE0";
  jpeg.resize(64, 'j');
  const std::string one = "1";
  auto tar = encoder.encode(std::vector<formats::TarMember>{{"x.jpg", bytes_of(jpeg)}, {"x.cls", bytes_of(one)}});
  tar.resize(tar.size() + formats::kTarEndSize);
  write_file(dir.path / "x.tar", tar);
  for (const fs::path& shard : {dir.path / "x.tar", write_shard(dir.path)}) {
    auto source = shard_source({shard.string()}, 50 + 14);  // x.jpg fits, b.png does not
    const auto later = read_all(*source, 0, nullptr, true);
    const auto read = read_all(*source, 0);
    REQUIRE(later.size() == read.size());
    for (std::size_t i = 0; i < later.size(); ++i) {
      CAPTURE(later[i].key);
      CHECK(buffered_bytes(later[i]) == buffered_bytes(read[i]));  // weighs as when read
      CHECK(later[i].label == read[i].label);                      // labels are read all the same
      CHECK(later[i].oversized_image == read[i].oversized_image);
    }
    if (shard.filename() == "x.tar") {
      CHECK_FALSE(later[0].image);  // passed over: its size and place alone
      CHECK(later[0].image_bytes == 64);
      REQUIRE(later[0].image_offset);
      CHECK(source->read_image(later[0]) == *read[0].image);
      // A shard cut short since it was listed: an error naming it.
      fs::resize_file(shard, *later[0].image_offset + 10);
      CHECK_THROWS_WITH_AS((void)source->read_image(later[0]), doctest::Contains("x.tar"), IoError);
    } else {
      REQUIRE(later[0].image);  // no image: its head kept, as when read
      CHECK(later[0].image->size() == 8);
      CHECK_FALSE(later[0].image_offset);
      CHECK_FALSE(later[1].image_offset);  // over the limit: never read
    }
  }
}

TEST_CASE("images read later from a compressed shard are read at once: they cannot be found again") {
  TempDir dir;
  const fs::path shard = write_shard(dir.path);
  REQUIRE(std::system(("gzip -k " + shard.string()).c_str()) == 0);
  auto source = shard_source({shard.string() + ".gz"}, 1 << 20);
  const auto later = read_all(*source, 0, nullptr, true);
  REQUIRE(later.size() == 3);
  REQUIRE(later[1].image);
  CHECK(later[1].image->size() == 100);
  CHECK_FALSE(later[1].image_offset);
}

TEST_CASE("a missing or damaged shard ends with a reason naming it") {
  TempDir dir;
  auto missing = shard_source({(dir.path / "nope.tar").string()}, 1 << 20);
  std::optional<std::string> ended;
  CHECK(read_all(*missing, 0, &ended).empty());
  REQUIRE(ended);
  CHECK(ended->find("nope.tar") != std::string::npos);

  const fs::path shard = write_shard(dir.path);
  const auto size = fs::file_size(shard);
  fs::resize_file(shard, size / 2 + 100);  // cut inside a member
  auto cut = shard_source({shard.string()}, 1 << 20);
  (void)read_all(*cut, 0, &ended);
  REQUIRE(ended);
  CHECK(ended->find("shard-0.tar") != std::string::npos);
}

TEST_CASE("take() returning false stops a unit early, without a reason") {
  TempDir dir;
  auto source = shard_source({write_shard(dir.path).string()}, 1 << 20);
  int seen = 0;
  auto ended = source->read(0, [&](RawSample) { return ++seen < 2; });
  CHECK(seen == 2);
  CHECK_FALSE(ended);
}

TEST_CASE("folder images: one unit each, labelled by class, unreadable ones said so") {
  TempDir dir;
  write_file(dir.path / "cat" / "1.jpg", bytes_of("CAT"));
  write_file(dir.path / "dog" / "2.jpg", bytes_of(std::string(64, 'd')));
  write_file(dir.path / "dog" / "3.jpg", bytes_of("DOG"));
  auto source = folder_source(formats::scan_image_folder(dir.path), 32);
  REQUIRE(source->units() == 3);
  CHECK(std::string(source->unit_name()) == "images");
  const auto cat = read_all(*source, 0);
  REQUIRE(cat.size() == 1);
  CHECK(cat[0].known_label == 0);
  CHECK(cat[0].image->size() == 3);
  const auto big = read_all(*source, 1);
  REQUIRE(big.size() == 1);
  CHECK(big[0].known_label == 1);
  CHECK(big[0].oversized_image == 64);
  fs::remove(dir.path / "dog" / "3.jpg");
  const auto gone = read_all(*source, 2);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].unreadable);
}

TEST_CASE("folder images read later: their size now, their bytes when asked") {
  TempDir dir;
  write_file(dir.path / "cat" / "1.jpg", bytes_of("CAT"));
  write_file(dir.path / "dog" / "2.jpg", bytes_of(std::string(64, 'd')));
  auto source = folder_source(formats::scan_image_folder(dir.path), 32);
  const auto cat = read_all(*source, 0, nullptr, true);
  REQUIRE(cat.size() == 1);
  CHECK_FALSE(cat[0].image);
  CHECK(cat[0].image_bytes == 3);
  REQUIRE(cat[0].image_offset == 0);
  const ByteBuffer bytes = source->read_image(cat[0]);
  CHECK(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()) == "CAT");
  const auto big = read_all(*source, 1, nullptr, true);
  CHECK(big[0].oversized_image == 64);
  CHECK_FALSE(big[0].image_offset);
  fs::remove(dir.path / "cat" / "1.jpg");
  CHECK_THROWS_AS((void)source->read_image(cat[0]), IoError);
}
