// Batch metadata as msgpack, and its hostile-input decoding.
#include <doctest/doctest.h>
#include <msgpack.hpp>

#include "tensorcom/codec/metadata.h"

using namespace tensorcom;

namespace {

std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

}  // namespace

TEST_CASE("metadata round trip") {
  BatchMetadata meta{
      {"n01440764_10026", "n01440764_10027"}, {"train-000.tar", "train-001.tar"}, "host:1", 77, {}, {}, {}, {}, {}, {}};
  SUBCASE("bytes") { CHECK(decode_metadata(encode_metadata(meta)) == meta); }
  SUBCASE("with the server's recipe flags") {
    meta.recipe = {"auto-augment", "ta_wide", "mixup-alpha", "0.2", "val", ""};
    CHECK(decode_metadata(encode_metadata(meta)) == meta);
    // {"recipe": ["size"]}: a flag without its value
    const auto odd =
        std::vector<std::byte>{std::byte{0x81}, std::byte{0xa6}, std::byte{'r'}, std::byte{'e'},  std::byte{'c'},
                               std::byte{'i'},  std::byte{'p'},  std::byte{'e'}, std::byte{0x91}, std::byte{0xa4},
                               std::byte{'s'},  std::byte{'i'},  std::byte{'z'}, std::byte{'e'}};
    CHECK_THROWS_WITH_AS((void)decode_metadata(odd), doctest::Contains("not flag, value pairs"), FormatError);
  }
  SUBCASE("with the batch's place in a resumable stream") {
    meta.epoch = 3;
    meta.place = StreamPlace{"2/8", "0123456789abcdef", 5, 41, 156, false};
    CHECK(decode_metadata(encode_metadata(meta)) == meta);
    meta.place->batches.reset();
    meta.place->last = true;
    CHECK(decode_metadata(encode_metadata(meta)) == meta);
  }
  SUBCASE("with each sample's geometry") {
    meta.geometry = {{10, 20, 300, 200, true, 500, 375, {}, std::nullopt, 0},
                     {0, 0, 1, 1, false, 1, 1, {}, std::nullopt, 0}};
    CHECK(decode_metadata(encode_metadata(meta)) == meta);
  }
  SUBCASE("with each sample's policy operations, none for some") {
    meta.geometry = {{10, 20, 300, 200, true, 500, 375, {{"ShearX", -0.25}, {"Posterize", 6.0}}, std::nullopt, 0},
                     {0, 0, 1, 1, false, 1, 1, {}, std::nullopt, 0}};
    const BatchMetadata back = decode_metadata(encode_metadata(meta));
    CHECK(back == meta);
    REQUIRE(back.geometry[0].ops.size() == 2);
    CHECK(back.geometry[0].ops[0].magnitude == -0.25);
  }
  SUBCASE("with each erased sample's box, none for others") {
    meta.geometry = {{10, 20, 300, 200, true, 500, 375, {}, std::array<std::int32_t, 4>{3, 4, 50, 60}, 0},
                     {0, 0, 1, 1, false, 1, 1, {}, std::nullopt, 0}};
    const BatchMetadata back = decode_metadata(encode_metadata(meta));
    CHECK(back == meta);
    CHECK_FALSE(back.geometry[1].erase.has_value());
  }
  SUBCASE("malformed policy operations are refused naming the field") {
    msgpack::sbuffer buffer;
    msgpack::packer<msgpack::sbuffer> packer(buffer);
    packer.pack_map(5);
    packer.pack(std::string("keys")).pack(std::vector<std::string>{"a"});
    packer.pack(std::string("shards")).pack(std::vector<std::string>{"s"});
    packer.pack(std::string("server")).pack(std::string("h"));
    packer.pack(std::string("seq")).pack(1);
    packer.pack(std::string("ops"));
    packer.pack_array(1);
    packer.pack_array(1);
    packer.pack(std::string("Rotate"));
    const auto* begin = reinterpret_cast<const std::byte*>(buffer.data());
    CHECK_THROWS_WITH_AS((void)decode_metadata({begin, buffer.size()}),
                         doctest::Contains("metadata 'ops' holds a name without its magnitude"), FormatError);
  }
  SUBCASE("with the batch's epoch and image size") {
    meta.epoch = 3;
    meta.size = 96;
    const BatchMetadata back = decode_metadata(encode_metadata(meta));
    CHECK(back == meta);
    CHECK(back.epoch == std::optional<std::uint64_t>(3));
    CHECK(back.size == std::optional<std::uint32_t>(96));
  }
  SUBCASE("metadata without epoch and size leaves them unset") {
    const BatchMetadata back = decode_metadata(encode_metadata(meta));
    CHECK_FALSE(back.epoch.has_value());
    CHECK_FALSE(back.size.has_value());
  }
  SUBCASE("as the 'meta' tensor of a batch") {
    Tensor t = metadata_tensor(meta);
    CHECK(t.info() == "meta");
    CHECK(t.dtype() == DType::kUInt8);
    TensorList batch{Tensor::zeros(DType::kUInt8, {2, 4, 4, 3}), Tensor::zeros(DType::kInt32, {2}), t};
    auto found = find_metadata(batch);
    REQUIRE(found.has_value());
    CHECK(*found == meta);
    batch.pop_back();
    CHECK_FALSE(find_metadata(batch).has_value());
  }
  SUBCASE("the encoding is a plain msgpack map") {
    BatchMetadata small{{}, {}, "", 5, {}, {}, {}, {}, {}, {}};
    // fixmap(4) "keys" [] "shards" [] "server" "" "seq" 5
    auto expected = bytes_of({0x84, 0xa4, 'k', 'e', 'y', 's', 0x90, 0xa6, 's',  'h',  'a', 'r', 'd', 's',
                              0x90, 0xa6, 's', 'e', 'r', 'v', 'e',  'r',  0xa0, 0xa3, 's', 'e', 'q', 0x05});
    CHECK(encode_metadata(small) == expected);
  }
  SUBCASE("a receipt request round-trips") {
    BatchMetadata meta;
    meta.sequence = 9;
    meta.receipt = DeliveryReceipt{{"tcp:40001", "ipc:@tensorcom-receipt-00112233aabbccdd"},
                                   0xfedcba9876543210ULL,
                                   "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"};
    CHECK(decode_metadata(encode_metadata(meta)) == meta);
    meta.receipt->key.clear();
    CHECK(decode_metadata(encode_metadata(meta)) == meta);
    // Every field at once: nineteen keys.
    meta.receipt->key = "k";
    meta.keys = {"a"};
    meta.shards = {"s"};
    meta.geometry = {SampleGeometry{1, 2, 3, 4, true, 5, 6, {}, std::nullopt, 0}};
    meta.epoch = 3;
    meta.size = 224;
    meta.place = StreamPlace{"0/1", "00112233445566aa", 7, 2, 10, false};
    CHECK(decode_metadata(encode_metadata(meta)) == meta);
    // {"run": "x"}: not a number
    CHECK_THROWS_WITH_AS((void)decode_metadata(bytes_of({0x81, 0xa3, 'r', 'u', 'n', 0xa1, 'x'})),
                         doctest::Contains("'run' is not an unsigned integer"), FormatError);
  }
  SUBCASE("unknown keys are skipped") {
    // {"seq": 3, "extra": 1}
    auto bytes = bytes_of({0x82, 0xa3, 's', 'e', 'q', 0x03, 0xa5, 'e', 'x', 't', 'r', 'a', 0x01});
    CHECK(decode_metadata(bytes).sequence == 3);
  }
}

TEST_CASE("hostile metadata") {
  SUBCASE("not a map") {
    CHECK_THROWS_WITH_AS((void)decode_metadata(bytes_of({0x91, 0x01})), doctest::Contains("not a map"), FormatError);
  }
  SUBCASE("truncated") {
    CHECK_THROWS_WITH_AS((void)decode_metadata(bytes_of({0x81, 0xa3, 's', 'e'})),
                         doctest::Contains("not valid msgpack"), FormatError);
  }
  SUBCASE("trailing bytes") {
    CHECK_THROWS_WITH_AS((void)decode_metadata(bytes_of({0x80, 0x00})), doctest::Contains("1 trailing bytes"),
                         FormatError);
  }
  SUBCASE("geometry that does not fit the samples") {
    BatchMetadata meta{{"a", "b"}, {"s", "s"}, "h", 1,  {{1, 2, 3, 4, false, 9, 9, {}, std::nullopt, 0}},
                       {},         {},         {},  {}, {}};
    CHECK_THROWS_WITH_AS((void)decode_metadata(encode_metadata(meta)),
                         doctest::Contains("geometry for 1 samples and 2 keys"), FormatError);
    // {"crops": [[1, 2, 3]]}: a box of three values
    auto short_box = bytes_of({0x81, 0xa5, 'c', 'r', 'o', 'p', 's', 0x91, 0x93, 0x01, 0x02, 0x03});
    CHECK_THROWS_WITH_AS((void)decode_metadata(short_box), doctest::Contains("item of 3 values"), FormatError);
    // {"flips": [1]}: not a boolean
    auto flips = bytes_of({0x81, 0xa5, 'f', 'l', 'i', 'p', 's', 0x91, 0x01});
    CHECK_THROWS_WITH_AS((void)decode_metadata(flips), doctest::Contains("non-boolean"), FormatError);
  }
  SUBCASE("wrong field types") {
    CHECK_THROWS_WITH_AS((void)decode_metadata(bytes_of({0x81, 0xa3, 's', 'e', 'q', 0xff})),
                         doctest::Contains("'seq' is not an unsigned integer"), FormatError);
    CHECK_THROWS_WITH_AS((void)decode_metadata(bytes_of({0x81, 0xa5, 'e', 'p', 'o', 'c', 'h', 0xff})),
                         doctest::Contains("'epoch' is not an unsigned integer"), FormatError);
    // {"size": 2**32}
    CHECK_THROWS_WITH_AS(
        (void)decode_metadata(bytes_of({0x81, 0xa4, 's', 'i', 'z', 'e', 0xcf, 0, 0, 0, 1, 0, 0, 0, 0})),
        doctest::Contains("'size' is too large"), FormatError);
    CHECK_THROWS_WITH_AS((void)decode_metadata(bytes_of({0x81, 0xa4, 'k', 'e', 'y', 's', 0x91, 0x01})),
                         doctest::Contains("'keys' holds a non-string"), FormatError);
  }
  SUBCASE("an array claiming four billion items allocates nothing") {
    CHECK_THROWS_AS((void)decode_metadata(bytes_of({0xdd, 0xff, 0xff, 0xff, 0xff})), FormatError);
  }
  SUBCASE("deep nesting") {
    CHECK_THROWS_AS((void)decode_metadata(bytes_of({0x91, 0x91, 0x91, 0x91, 0x91, 0x90})), FormatError);
  }
}
