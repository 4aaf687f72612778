// .ten files: writing, zero-copy reading, several lists back to back.
#include <doctest/doctest.h>

#include <fstream>
#include <unistd.h>

#include "tensorcom/codec/ten_file.h"
#include "tensorcom/codec/ten_writer.h"
#include "test_support.h"

using namespace tensorcom;
namespace fs = std::filesystem;
using tensorcom::testing::same_lists;
using tensorcom::testing::TempDir;

namespace {

TensorList batch(std::int64_t size, std::uint8_t fill) {
  Tensor images = Tensor::allocate(DType::kUInt8, {size, 4, 4, 3});
  std::memset(images.data(), fill, images.nbytes());
  Tensor labels = Tensor::zeros(DType::kInt32, {size});
  labels.values<std::int32_t>()[0] = fill;
  return {images, labels};
}

}  // namespace

TEST_CASE("write and read back") {
  TempDir dir;
  fs::path file = dir.path / "one.ten";
  TensorList list = batch(3, 9);

  SUBCASE("one list, read into one buffer that the tensors share") {
    write_ten(file, list);
    CHECK(fs::file_size(file) == encoded_size(list));
    TensorList back = read_ten(file);
    REQUIRE(back.size() == 2);
    CHECK(back[0].same_as(list[0]));
    CHECK(back[1].same_as(list[1]));
    CHECK(back[0].owner() != nullptr);
    CHECK(back[0].owner() == back[1].owner());
  }
  SUBCASE("tensors read stay whole after the file is cut") {
    write_ten(file, list);
    TensorList flat = read_ten(file);
    TensorList first = *TenListReader(file).next();
    fs::resize_file(file, 0);
    CHECK(flat[0].same_as(list[0]));
    CHECK(first[1].same_as(list[1]));
  }
  SUBCASE("a file cut while its lists are read is an IoError naming it") {
    {
      TenWriter writer(file);
      for (int i = 0; i < 3; ++i) writer.write(list);
    }
    TenListReader reader(file, 2);
    REQUIRE(reader.next());
    fs::resize_file(file, encoded_size(list) + 100);
    CHECK_THROWS_WITH_AS((void)reader.next(), doctest::Contains("one.ten' at byte"), IoError);
  }
  SUBCASE("the written bytes equal the in-memory encoding") {
    write_ten(file, list);
    std::ifstream in(file, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    SharedBuffer expected = encode_buffer(list);
    REQUIRE(bytes.size() == expected.size());
    CHECK(std::memcmp(bytes.data(), expected.data(), bytes.size()) == 0);
  }
  SUBCASE("an empty file holds no tensors") {
    std::ofstream(file).close();
    CHECK(read_ten(file).empty());
    CHECK(read_ten_lists(file).empty());
  }
  SUBCASE("a missing file is an IoError naming it") {
    CHECK_THROWS_WITH_AS((void)read_ten(dir.path / "nope.ten"), doctest::Contains("nope.ten"), IoError);
  }
  SUBCASE("a corrupt file is a FormatError naming it") {
    write_ten(file, list);
    fs::resize_file(file, fs::file_size(file) - 70);
    CHECK_THROWS_WITH_AS((void)read_ten(file), doctest::Contains("one.ten"), FormatError);
  }
  SUBCASE("writing through a view does not change the file") {
    write_ten(file, list);
    TensorList back = read_ten(file);
    back[0].data()[0] = std::byte{0xee};
    TensorList again = read_ten(file);
    CHECK(again[0].same_as(list[0]));
  }
}

TEST_CASE("several lists back to back") {
  TempDir dir;
  fs::path file = dir.path / "batches.ten";
  {
    TenWriter writer(file);
    writer.write(batch(4, 1));
    writer.write(batch(4, 2));
    writer.write(batch(2, 3));  // a short last batch
    writer.close();
    CHECK(writer.bytes_written() == fs::file_size(file));
  }

  SUBCASE("inferred list length") {
    auto lists = read_ten_lists(file);
    REQUIRE(lists.size() == 3);
    CHECK(lists[2][0].dim(0) == 2);
    CHECK(lists[1][1].values<std::int32_t>()[0] == 2);
  }
  SUBCASE("explicit list length") {
    CHECK(read_ten_lists(file, 2).size() == 3);
    CHECK(read_ten_lists(file, 6).size() == 1);
    CHECK_THROWS_WITH_AS((void)read_ten_lists(file, 4), doctest::Contains("do not split into lists of 4"), FormatError);
  }
  SUBCASE("appending adds lists") {
    TenWriter writer(file, TenWriter::Mode::kAppend);
    writer.write(batch(4, 4));
    writer.close();
    CHECK(read_ten_lists(file).size() == 4);
  }
  SUBCASE("the reference's load() sees one flat list") { CHECK(read_ten(file).size() == 6); }
}

TEST_CASE("list length inference") {
  Tensor a = Tensor::zeros(DType::kUInt8, {2, 3}, "a");
  Tensor b = Tensor::zeros(DType::kFloat32, {2}, "b");
  Tensor a_short = Tensor::zeros(DType::kUInt8, {1, 3}, "a");
  Tensor a_wide = Tensor::zeros(DType::kUInt8, {2, 4}, "a");
  CHECK(infer_list_length(TensorList{}) == 0);
  CHECK(infer_list_length(TensorList{a}) == 1);
  CHECK(infer_list_length(TensorList{a, b}) == 2);
  CHECK(infer_list_length(TensorList{a, b, a_short, b}) == 2);
  CHECK(infer_list_length(TensorList{a, b, a_wide, b}) == 4);
  CHECK(infer_list_length(TensorList{a, b, a}) == 3);
}

namespace {

// The lists of a file as TenListReader streams them.
std::vector<TensorList> stream_lists(const fs::path& file, std::size_t tensors_per_list, const DecodeLimits& limits) {
  TenListReader reader(file, tensors_per_list, limits);
  std::vector<TensorList> lists;
  while (auto list = reader.next()) lists.push_back(std::move(*list));
  return lists;
}

std::vector<TensorList> salvaged(const fs::path& file, std::size_t tensors_per_list, SalvageReport& report) {
  std::vector<TensorList> lists;
  report = salvage_ten(file, tensors_per_list, [&](TensorList&& list) { lists.push_back(std::move(list)); });
  return lists;
}

std::vector<char> file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("a .ten file's length is not bounded by the per-list limit") {
  TempDir dir;
  fs::path file = dir.path / "long.ten";
  // 32769 batches of two empty tensors: 65538 tensors in 6 MB.
  const Tensor images = Tensor::zeros(DType::kUInt8, {0, 2});
  const Tensor labels = Tensor::zeros(DType::kInt32, {0});
  constexpr std::size_t kBatches = 32769;
  {
    TenWriter writer(file);
    for (std::size_t i = 0; i < kBatches; ++i) writer.write(TensorList{images, labels});
    writer.close();
  }
  SUBCASE("read as lists, inferred and given") {
    auto lists = read_ten_lists(file);
    REQUIRE(lists.size() == kBatches);
    CHECK(lists.back()[1].same_as(labels));
    CHECK(read_ten_lists(file, 2).size() == kBatches);
  }
  SUBCASE("read flat, as the reference's load()") { CHECK(read_ten(file).size() == 2 * kBatches); }
  SUBCASE("one list longer than the limit is still refused") {
    CHECK_THROWS_WITH_AS((void)read_ten_lists(file, 2 * kBatches), doctest::Contains("exceed"), ArgumentError);
  }
}

TEST_CASE("streaming lists past the tensors the length is inferred from") {
  TempDir dir;
  fs::path file = dir.path / "batches.ten";
  DecodeLimits limits;
  limits.max_tensors = 4;  // settled after 4 + 2 tensors
  TenWriter writer(file);
  for (int i = 0; i < 10; ++i) writer.write(batch(2, static_cast<std::uint8_t>(i)));

  SUBCASE("every list comes out, in order") {
    writer.close();
    auto lists = stream_lists(file, kInferListLength, limits);
    REQUIRE(lists.size() == 10);
    CHECK(lists[9][1].values<std::int32_t>()[0] == 9);
  }
  SUBCASE("a tensor after that breaking the pattern is an error at its list") {
    writer.write(TensorList{Tensor::zeros(DType::kFloat32, {2}), Tensor::zeros(DType::kInt32, {2})});
    writer.close();
    TenListReader reader(file, kInferListLength, limits);
    CHECK(reader.list_length() == 2);
    for (int i = 0; i < 10; ++i) REQUIRE(reader.next());
    try {
      (void)reader.next();
      FAIL("no error");
    } catch (const FormatError& e) {
      CHECK(e.kind() == FormatErrorKind::kListLength);
      CHECK(std::string(e.what()).find("tensor 20: its dtype, info or shape breaks the pattern of lists of 2") !=
            std::string::npos);
    }
  }
  SUBCASE("a last list cut short") {
    writer.write(TensorList{batch(2, 10)[0]});
    writer.close();
    CHECK_THROWS_WITH_AS((void)stream_lists(file, kInferListLength, limits),
                         doctest::Contains("21 tensors do not split into lists of 2"), FormatError);
  }
  SUBCASE("no pattern within the limit") {
    writer.close();
    limits.max_tensors = 1;
    CHECK_THROWS_WITH_AS(TenListReader(file, kInferListLength, limits), doctest::Contains("lists of 2 tensors exceed"),
                         FormatError);
  }
}

TEST_CASE("salvaging a file cut short") {
  TempDir dir;
  fs::path file = dir.path / "cut.ten";
  std::vector<TensorList> written;
  for (int i = 0; i < 3; ++i) written.push_back(batch(2, static_cast<std::uint8_t>(i + 1)));
  const std::vector<TensorList> before_last(written.begin(), written.end() - 1);
  std::uint64_t last_batch_start = 0;
  {
    TenWriter writer(file);
    for (const TensorList& list : before_last) writer.write(list);
    last_batch_start = writer.bytes_written();
    writer.write(written.back());
    writer.close();
  }
  const std::vector<char> whole = file_bytes(file);
  // The labels' padding may be missing at the end of a file: the reference
  // reads such a file whole.
  const std::uint64_t last_payload_end = whole.size() - (kChunkPadding - sizeof(std::int32_t) * 2);

  SUBCASE("at every byte of the last batch, exactly the batches before it") {
    for (std::uint64_t cut = last_batch_start; cut < whole.size(); ++cut) {
      CAPTURE(cut);
      fs::resize_file(file, cut);
      SalvageReport report;
      auto lists = salvaged(file, kInferListLength, report);
      const bool last_whole = cut >= last_payload_end;
      CHECK(same_lists(lists, last_whole ? written : before_last));
      CHECK(report.lists == lists.size());
      CHECK(report.tensors == 2 * lists.size());
      CHECK(report.list_length == 2);
      CHECK(report.file_bytes == cut);
      CHECK(report.intact() == (last_whole || cut == last_batch_start));
      if (!last_whole) CHECK(report.whole_bytes == last_batch_start);
      // With the length given, the same.
      SalvageReport given;
      CHECK(same_lists(salvaged(file, 2, given), lists));
      std::ofstream(file, std::ios::binary).write(whole.data(), static_cast<std::streamsize>(whole.size()));
    }
  }
  SUBCASE("the damage is located") {
    fs::resize_file(file, whole.size() - 100);
    SalvageReport report;
    (void)salvaged(file, kInferListLength, report);
    REQUIRE(report.damage);
    CHECK(report.damage->kind() == FormatErrorKind::kOddChunkCount);
    CHECK(report.lost_tensors == 1);
    CHECK(report.whole_bytes == last_batch_start);
  }
  SUBCASE("an intact file is read as TenListReader reads it") {
    SalvageReport report;
    CHECK(same_lists(salvaged(file, kInferListLength, report), read_ten_lists(file)));
    CHECK(report.intact());
    CHECK(report.whole_bytes == whole.size());
  }
  SUBCASE("a damaged first list: no repetition, nothing known to be whole") {
    fs::resize_file(file, last_batch_start / 2 + 100);  // inside the second batch's image data
    SalvageReport report;
    CHECK(salvaged(file, kInferListLength, report).empty());
    CHECK(report.list_length == 0);
    CHECK(report.lost_tensors == 2);
    // Given the length, the first batch comes back.
    CHECK(salvaged(file, 2, report).size() == 1);
  }
  SUBCASE("garbage in the middle ends the salvage there") {
    std::vector<char> bad = whole;
    bad[last_batch_start] = 'X';
    std::ofstream(file, std::ios::binary).write(bad.data(), static_cast<std::streamsize>(bad.size()));
    SalvageReport report;
    CHECK(same_lists(salvaged(file, kInferListLength, report), before_last));
    REQUIRE(report.damage);
    CHECK(report.damage->kind() == FormatErrorKind::kBadMagic);
    CHECK(report.damage->offset() == last_batch_start);
  }
}

TEST_CASE("replacing a file through a temporary one") {
  TempDir dir;
  fs::path file = dir.path / "out.ten";
  const TensorList list = batch(2, 5);

  SUBCASE("the file appears on close, whole") {
    TenWriter writer(file, TenWriter::Mode::kReplace);
    const fs::path temporary = writer.temporary_path();
    CHECK(temporary.parent_path() == dir.path);
    CHECK(temporary.filename().string().starts_with("out.ten."));
    CHECK(temporary.extension() == ".partial");
    writer.write(list);
    CHECK(fs::exists(temporary));
    CHECK_FALSE(fs::exists(file));
    writer.close();
    CHECK_FALSE(fs::exists(temporary));
    CHECK(read_ten_lists(file).size() == 1);
    CHECK((fs::status(file).permissions() & fs::perms::owner_read) != fs::perms::none);
  }
  SUBCASE("an older file stays until the new one is whole") {
    write_ten(file, list);
    TenWriter writer(file, TenWriter::Mode::kReplace);
    writer.write(list);
    writer.write(list);
    CHECK(read_ten_lists(file).size() == 1);
    writer.close();
    CHECK(read_ten_lists(file).size() == 2);
  }
  SUBCASE("discard removes the temporary file and leaves the old one") {
    write_ten(file, list);
    TenWriter writer(file, TenWriter::Mode::kReplace);
    writer.write(list);
    writer.write(list);
    writer.discard();
    CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
    CHECK(read_ten_lists(file).size() == 1);
  }
  SUBCASE("without close (a crash) the temporary file keeps what was written") {
    fs::path temporary;
    {
      TenWriter writer(file, TenWriter::Mode::kReplace);
      temporary = writer.temporary_path();
      writer.write(list);
    }
    CHECK_FALSE(fs::exists(file));
    SalvageReport report;
    CHECK(salvaged(temporary, kInferListLength, report).size() == 1);
    CHECK(report.intact());
  }
  SUBCASE("a folder that does not exist") {
    CHECK_THROWS_AS(TenWriter(dir.path / "no" / "out.ten", TenWriter::Mode::kReplace), IoError);
  }
}

namespace {

bool same_list(const TensorList& a, const TensorList& b) { return same_lists({a}, {b}); }

}  // namespace

TEST_CASE("a read buffer pool hands the pages of lists no longer used to the next") {
  TempDir dir;
  fs::path file = dir.path / "batches.ten";
  {
    TenWriter writer(file);
    for (std::uint8_t fill = 1; fill <= 3; ++fill) writer.write(batch(64, fill));  // 3 KiB images a list
  }
  const std::vector<TensorList> expected = read_ten_lists(file);
  REQUIRE(expected.size() == 3);

  SUBCASE("a list freed gives its buffer to the next, whose contents are its own") {
    const ReadBufferPool pool(1 << 20);
    TenListReader reader(file, kInferListLength, {}, &pool);
    const std::byte* first_data = nullptr;
    {
      const TensorList first = *reader.next();
      CHECK(same_list(first, expected[0]));
      first_data = first[0].data();
      CHECK(pool.free_bytes() == 0);
    }
    CHECK(pool.free_bytes() > 0);
    const TensorList second = *reader.next();
    CHECK(second[0].data() == first_data);
    CHECK(pool.free_bytes() == 0);
    CHECK(same_list(second, expected[1]));
  }
  SUBCASE("lists in use never share a buffer") {
    const ReadBufferPool pool(1 << 20);
    TenListReader reader(file, kInferListLength, {}, &pool);
    const TensorList first = *reader.next(), second = *reader.next(), third = *reader.next();
    CHECK(first[0].data() != second[0].data());
    CHECK(second[0].data() != third[0].data());
    CHECK(same_list(third, expected[2]));
    CHECK(same_list(first, expected[0]));
  }
  SUBCASE("the pool keeps no more than its bound") {
    const ReadBufferPool pool(0);
    TenListReader reader(file, kInferListLength, {}, &pool);
    (void)reader.next();
    CHECK(pool.free_bytes() == 0);
    CHECK(same_list(*reader.next(), expected[1]));
  }
  SUBCASE("lists outlive the pool and the reader") {
    std::optional<TensorList> kept;
    {
      const ReadBufferPool pool(1 << 20);
      TenListReader reader(file, kInferListLength, {}, &pool);
      (void)reader.next();
      kept = reader.next();
    }
    CHECK(same_list(*kept, expected[1]));
  }
}
