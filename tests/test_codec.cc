// The tenbin codec in memory: headers, single-buffer and multipart encodings,
// and decoding of hostile input.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>

#include "tensorcom/codec/tenbin.h"
#include "test_support.h"

using namespace tensorcom;
using tensorcom::testing::put_i64;
using tensorcom::testing::put_text;
using tensorcom::testing::to_bytes;

namespace {

Tensor iota_tensor(DType dtype, Shape shape, std::string_view info = {}) {
  Tensor t = Tensor::allocate(dtype, std::move(shape), info);
  auto bytes = t.bytes();
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 1);
  return t;
}

// A valid two-tensor buffer: float32 (2,3) "img" and int32 (2,) "cls".
std::vector<std::byte> sample_buffer() {
  std::array<float, 6> pixels{1, 2, 3, 4, 5, 6};
  std::array<std::int32_t, 2> labels{7, -8};
  TensorList list{Tensor::from_values<float>({2, 3}, pixels, "img"),
                  Tensor::from_values<std::int32_t>({2}, labels, "cls")};
  return to_bytes(encode_buffer(list).bytes());
}

std::string decode_error(const std::vector<std::byte>& bytes) {
  try {
    (void)decode_buffer(bytes);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "no error";
}

// The kind of the error decoding bytes raises: what a Connection counts.
std::optional<FormatErrorKind> decode_kind(const std::vector<std::byte>& bytes) {
  try {
    (void)decode_buffer(bytes);
  } catch (const FormatError& e) {
    return e.kind();
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("dtype table") {
  for (DType d : kAllDTypes) {
    CHECK(dtype_from_code(dtype_code(d)) == d);
    CHECK(parse_dtype(dtype_name(d)) == d);
  }
  CHECK(dtype_code(DType::kUInt32) == "u4");
  CHECK(dtype_name(DType::kUInt32) == "uint32");
  CHECK(itemsize(DType::kFloat16) == 2);
  CHECK(itemsize(DType::kUInt64) == 8);
  CHECK_FALSE(dtype_from_code("unit32").has_value());
  CHECK_FALSE(parse_dtype("complex64").has_value());
}

TEST_CASE("tensor") {
  SUBCASE("allocation is 64-byte aligned and sized by the shape") {
    Tensor t = Tensor::allocate(DType::kInt16, {3, 5}, "x");
    CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);
    CHECK(t.nbytes() == 30);
    CHECK(t.numel() == 15);
    CHECK(t.info() == "x");
  }
  SUBCASE("0-d tensors hold one element") {
    Tensor t = Tensor::zeros(DType::kFloat64, {});
    CHECK(t.ndim() == 0);
    CHECK(t.nbytes() == 8);
  }
  SUBCASE("bad shapes and infos are rejected") {
    CHECK_THROWS_AS((void)Tensor::allocate(DType::kUInt8, {-1}), ArgumentError);
    CHECK_THROWS_AS((void)Tensor::allocate(DType::kUInt64, {1ll << 40, 1ll << 40}), ArgumentError);
    CHECK_THROWS_WITH_AS((void)Tensor::allocate(DType::kUInt8, {1}, "123456789"), doctest::Contains("123456789"),
                         ArgumentError);
  }
  SUBCASE("values are typed") {
    Tensor t = Tensor::zeros(DType::kInt32, {4});
    t.values<std::int32_t>()[2] = 42;
    CHECK(t.values<std::int32_t>()[2] == 42);
    CHECK_THROWS_AS((void)t.values<float>(), ArgumentError);
    Tensor half = Tensor::zeros(DType::kFloat16, {2});
    CHECK(half.values<std::uint16_t>().size() == 2);
  }
  SUBCASE("views share their owner") {
    auto buffer = SharedBuffer::allocate(12);
    Tensor v = Tensor::view(DType::kFloat32, {3}, buffer.data(), buffer.owner());
    CHECK(v.owner() == buffer.owner());
    CHECK(v.data() == buffer.data());
  }
  CHECK(format_shape(Shape{2, 3}) == "(2, 3)");
  CHECK(format_shape(Shape{5}) == "(5,)");
  CHECK(format_shape(Shape{}) == "()");
}

TEST_CASE("single-buffer encoding") {
  SUBCASE("layout of one tensor") {
    Tensor t = iota_tensor(DType::kUInt8, {1, 63}, "a");
    SharedBuffer buf = encode_buffer(std::span(&t, 1));
    REQUIRE(buf.size() == 16 + 64 + 16 + 64);
    auto b = buf.bytes();
    CHECK(std::memcmp(b.data(), "~TenBin~", 8) == 0);
    std::int64_t len;
    std::memcpy(&len, b.data() + 8, 8);
    CHECK(len == 40);
    CHECK(std::memcmp(b.data() + 16, "u1\0\0\0\0\0\0a\0\0\0\0\0\0\0", 16) == 0);
    std::memcpy(&len, b.data() + 88, 8);
    CHECK(len == 63);
    CHECK(b[96 + 63] == std::byte{0});  // padding is zero
  }
  SUBCASE("round trip of every dtype, 0-d and empty tensors") {
    TensorList list;
    for (DType d : kAllDTypes) list.push_back(iota_tensor(d, {2, 3}, dtype_code(d)));
    list.push_back(iota_tensor(DType::kUInt32, {}, "scalar"));
    list.push_back(iota_tensor(DType::kUInt8, {0, 5}));
    list.push_back(iota_tensor(DType::kInt8, {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1}));
    SharedBuffer buf = encode_buffer(list);
    CHECK(buf.size() == encoded_size(list));
    TensorList back = decode_buffer(buf.bytes(), buf.owner());
    REQUIRE(back.size() == list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      CAPTURE(i);
      CHECK(back[i].same_as(list[i]));
      CHECK(back[i].owner() == buf.owner());  // a view, not a copy
    }
  }
  SUBCASE("encode_into refuses a short buffer") {
    Tensor t = iota_tensor(DType::kUInt8, {10});
    std::vector<std::byte> small(100);
    CHECK_THROWS_AS(encode_into(std::span(&t, 1), small), ArgumentError);
  }
  SUBCASE("a stream without its final padding still decodes") {
    auto bytes = sample_buffer();
    bytes.resize(bytes.size() - 56);  // the last payload is 8 bytes
    CHECK(decode_buffer(bytes).size() == 2);
  }
}

TEST_CASE("hostile single buffers") {
  auto good = sample_buffer();
  REQUIRE(decode_buffer(good).size() == 2);
  std::vector<std::byte> bad = good;

  SUBCASE("bad magic") {
    put_text(bad, 0, "~TenBun~");
    CHECK(decode_error(bad).find("bad magic '~TenBun~'") != std::string::npos);
    CHECK(decode_error(bad).find("at byte 0") != std::string::npos);
    CHECK(decode_kind(bad) == FormatErrorKind::kBadMagic);
  }
  SUBCASE("length longer than the input") {
    put_i64(bad, 8, 1'000'000);
    CHECK(decode_error(bad).find("chunk length 1000000 but") != std::string::npos);
    CHECK(decode_kind(bad) == FormatErrorKind::kChunkLength);
  }
  SUBCASE("negative length") {
    put_i64(bad, 8, -5);
    CHECK(decode_error(bad).find("chunk length -5") != std::string::npos);
  }
  SUBCASE("header too short for its ndim") {
    put_i64(bad, 16 + 16, 4);  // ndim 4 in a 40-byte header
    CHECK(decode_error(bad).find("ndim 4 needs 56") != std::string::npos);
    CHECK(decode_kind(bad) == FormatErrorKind::kBadHeader);
  }
  SUBCASE("huge ndim") {
    put_i64(bad, 16 + 16, 1'000'000'000);
    CHECK(decode_error(bad).find("ndim 1000000000 outside 0..32") != std::string::npos);
  }
  SUBCASE("negative ndim") {
    put_i64(bad, 16 + 16, -1);
    CHECK(decode_error(bad).find("ndim -1") != std::string::npos);
  }
  SUBCASE("overflowing dims") {
    put_i64(bad, 16 + 24, 1ll << 40);
    put_i64(bad, 16 + 32, 1ll << 40);
    CHECK(decode_error(bad).find("overflows 64 bits") != std::string::npos);
    CHECK(decode_kind(bad) == FormatErrorKind::kBadHeader);
  }
  SUBCASE("an empty tensor whose other dims overflow (found by the Python fuzz loop: numpy refused it)") {
    put_i64(bad, 16 + 24, 0);
    put_i64(bad, 16 + 32, 1ll << 62);
    CHECK(decode_error(bad).find("overflows 64 bits") != std::string::npos);
    CHECK(decode_kind(bad) == FormatErrorKind::kBadHeader);
    put_i64(bad, 16 + 32, 1ll << 40);  // within bounds: an empty tensor
    CHECK(decode_buffer(bad)[0].nbytes() == 0);
  }
  SUBCASE("negative dim") {
    put_i64(bad, 16 + 32, -3);
    CHECK(decode_error(bad).find("dimension 1 is negative (-3)") != std::string::npos);
  }
  SUBCASE("unknown dtype") {
    put_text(bad, 16, "c8");
    CHECK(decode_error(bad).find("unknown dtype code 'c8") != std::string::npos);
    put_text(bad, 16, "unit32");
    CHECK(decode_error(bad).find("unknown dtype code 'unit32") != std::string::npos);
    CHECK(decode_kind(bad) == FormatErrorKind::kBadHeader);
  }
  SUBCASE("dims larger than the data payload") {
    put_i64(bad, 16 + 24, 3);  // (3, 3) float32 needs 36 bytes, payload has 24
    CHECK(decode_error(bad).find("tensor 0: data payload is 24 bytes, shape (3, 3) of float32 needs 36") !=
          std::string::npos);
    CHECK(decode_kind(bad) == FormatErrorKind::kDataPayload);
  }
  SUBCASE("truncated payload") {
    bad.resize(good.size() - 60);
    CHECK(decode_error(bad).find("chunk length 8 but 4 bytes remain") != std::string::npos);
  }
  SUBCASE("truncated prefix") {
    bad.resize(good.size() - 64 - 10);
    CHECK(decode_error(bad).find("chunk prefix cut short") != std::string::npos);
    CHECK(decode_kind(bad) == FormatErrorKind::kChunkPrefix);
  }
  SUBCASE("odd chunk count") {
    bad.resize(good.size() - 80);  // drop the last data chunk
    CHECK(decode_error(bad).find("odd chunk count 3") != std::string::npos);
    CHECK(decode_kind(bad) == FormatErrorKind::kOddChunkCount);
  }
  SUBCASE("non-ASCII info") {
    bad[16 + 8] = std::byte{0xff};
    CHECK(decode_error(bad).find("info field '\\xff") != std::string::npos);
    CHECK(decode_kind(bad) == FormatErrorKind::kBadHeader);
  }
  SUBCASE("too many tensors for the limits") {
    DecodeLimits limits;
    limits.max_tensors = 1;
    CHECK_THROWS_WITH_AS((void)decode_buffer(good, nullptr, limits), doctest::Contains("more than 1 tensors"),
                         FormatError);
    try {
      (void)decode_buffer(good, nullptr, limits);
    } catch (const FormatError& e) {
      CHECK(e.kind() == FormatErrorKind::kTooManyTensors);
    }
  }
}

TEST_CASE("multipart frames") {
  Tensor a = iota_tensor(DType::kUInt8, {4, 8, 8, 3});
  Tensor b = iota_tensor(DType::kInt32, {4});
  std::vector<std::byte> ha(header_size(a)), hb(header_size(b));
  write_header(a, ha);
  write_header(b, hb);
  CHECK(ha.size() == 56);
  CHECK(hb.size() == 32);
  std::vector<FrameView> frames{{ha, nullptr}, {a.bytes(), a.owner()}, {hb, nullptr}, {b.bytes(), b.owner()}};

  SUBCASE("decode gives views of the data frames") {
    TensorList list = decode_frames(frames);
    REQUIRE(list.size() == 2);
    CHECK(list[0].same_as(a));
    CHECK(list[1].same_as(b));
    CHECK(list[0].data() == a.data());
    CHECK(list[0].owner() == a.owner());
  }
  SUBCASE("a data frame at an odd address is copied so that typed access is aligned") {
    std::vector<std::byte> unaligned(b.nbytes() + 1);
    std::memcpy(unaligned.data() + 1, b.data(), b.nbytes());
    std::vector<FrameView> odd{{hb, nullptr}, {std::span(unaligned).subspan(1), nullptr}};
    TensorList list = decode_frames(odd);
    REQUIRE(list.size() == 1);
    CHECK(list[0].same_as(b));
    CHECK(reinterpret_cast<std::uintptr_t>(list[0].data()) % alignof(std::int32_t) == 0);
    CHECK(list[0].data() != unaligned.data() + 1);
  }
  SUBCASE("decode_message tells single from multipart") {
    CHECK(decode_message(frames).size() == 2);
    TensorList pair{a, b};
    SharedBuffer single = encode_buffer(pair);
    std::vector<FrameView> one{{single.bytes(), single.owner()}};
    TensorList list = decode_message(one);
    REQUIRE(list.size() == 2);
    CHECK(list[1].same_as(b));
  }
  SUBCASE("odd frame count") {
    frames.pop_back();
    CHECK_THROWS_WITH_AS((void)decode_frames(frames), doctest::Contains("odd frame count 3"), FormatError);
    try {
      (void)decode_frames(frames);
    } catch (const FormatError& e) {
      CHECK(e.kind() == FormatErrorKind::kOddFrameCount);
      CHECK(format_error_kind_name(e.kind()) == "odd frame count");
    }
  }
  SUBCASE("a short data frame names the tensor") {
    frames[3].bytes = frames[3].bytes.first(15);
    CHECK_THROWS_WITH_AS((void)decode_frames(frames), doctest::Contains("tensor 1: data payload is 15 bytes"),
                         FormatError);
  }
  SUBCASE("a header frame that is too short") {
    frames[2].bytes = frames[2].bytes.first(20);
    CHECK_THROWS_WITH_AS((void)decode_frames(frames), doctest::Contains("header is 20 bytes, need at least 24"),
                         FormatError);
  }
  SUBCASE("encoding a tensor of too many dimensions is refused") {
    Tensor deep = Tensor::zeros(DType::kUInt8, Shape(kMaxNdim + 1, 1));
    std::vector<std::byte> h(header_size(deep));
    CHECK_THROWS_AS(write_header(deep, h), ArgumentError);
  }
}
