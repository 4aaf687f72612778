// .ten files: writing, zero-copy reading, several lists back to back.
#include <doctest/doctest.h>

#include <fstream>
#include <unistd.h>

#include "tensorcom/ten_file.h"
#include "test_support.h"

using namespace tensorcom;
namespace fs = std::filesystem;
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

  SUBCASE("one list, read zero-copy from the mapping") {
    write_ten(file, list);
    CHECK(fs::file_size(file) == encoded_size(list));
    TensorList back = read_ten(file);
    REQUIRE(back.size() == 2);
    CHECK(back[0].same_as(list[0]));
    CHECK(back[1].same_as(list[1]));
    auto mapping = std::static_pointer_cast<const MappedFile>(back[0].owner());
    REQUIRE(mapping != nullptr);
    auto range = mapping->bytes();
    CHECK(back[0].data() >= range.data());
    CHECK(back[0].data() < range.data() + range.size());
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
    CHECK_THROWS_WITH_AS((void)read_ten_lists(file, 4), doctest::Contains("do not split into lists of 4"),
                         FormatError);
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
