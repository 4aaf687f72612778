// Images compressed for the wire: the round trip, the --wire text, and
// every malformed triple refused by name with the batch left as it was.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tensorcom/codec/compressed_images.h"
#include "tensorcom/codec/error.h"

using namespace tensorcom;

namespace {

// Smooth colour gradients plus a little noise: what a photo crop compresses like.
Tensor photo_like(std::int64_t n, std::int64_t h, std::int64_t w, bool planar, unsigned seed = 1) {
  Tensor t = Tensor::allocate(DType::kUInt8, planar ? Shape{n, 3, h, w} : Shape{n, h, w, 3});
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-6, 6);
  auto* p = reinterpret_cast<std::uint8_t*>(t.data());
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t y = 0; y < h; ++y) {
      for (std::int64_t x = 0; x < w; ++x) {
        for (std::int64_t c = 0; c < 3; ++c) {
          const int v = static_cast<int>(40 + 150 * (c == 0 ? x : c == 1 ? y : x + y) / (w + h) + 20 * i) + noise(rng);
          const std::int64_t at = planar ? ((i * 3 + c) * h + y) * w + x : ((i * h + y) * w + x) * 3 + c;
          p[at] = static_cast<std::uint8_t>(std::clamp(v, 0, 255));
        }
      }
    }
  }
  return t;
}

double psnr(const Tensor& a, const Tensor& b) {
  REQUIRE(a.nbytes() == b.nbytes());
  double sum = 0;
  const auto* x = reinterpret_cast<const std::uint8_t*>(a.data());
  const auto* y = reinterpret_cast<const std::uint8_t*>(b.data());
  for (std::size_t i = 0; i < a.nbytes(); ++i) sum += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  const double mse = sum / static_cast<double>(a.nbytes());
  return mse == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 / mse);
}

WireFormat jpeg(int quality = 95) { return parse_wire_format("jpeg:" + std::to_string(quality)); }

// A compressed batch [streams, offsets, shape, labels] to spoil.
TensorList compressed_batch(std::int64_t n = 3, std::int64_t side = 16) {
  TensorList batch = compress_images(photo_like(n, side, side, false), jpeg(), 2);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n), 7);
  batch.push_back(Tensor::from_values<std::int32_t>({n}, labels));
  return batch;
}

void check_refused(TensorList batch, const std::string& words) {
  const TensorList before = batch;
  try {
    decompress_images(batch, {}, 2);
    FAIL("accepted: " << words);
  } catch (const FormatError& e) {
    CHECK(e.kind() == FormatErrorKind::kCompressedImages);
    CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, e.what());
  }
  REQUIRE(batch.size() == before.size());
  for (std::size_t i = 0; i < batch.size(); ++i) CHECK(batch[i].same_as(before[i]));
}

std::int32_t* offsets_of(TensorList& batch) { return batch[1].values<std::int32_t>().data(); }

}  // namespace

TEST_CASE("a batch of images goes through compressed and comes back close") {
  for (const bool planar : {false, true}) {
    CAPTURE(planar);
    const Tensor images = photo_like(5, 40, 56, planar);
    TensorList batch = compress_images(images, jpeg(), 3);
    REQUIRE(batch.size() == 3);
    CHECK(batch[0].info() == (planar ? "jpegchw" : "jpeg"));
    CHECK(batch[0].dtype() == DType::kUInt8);
    CHECK(batch[1].info() == "imgoff");
    CHECK((batch[1].shape() == Shape{6} && batch[1].dtype() == DType::kInt32));
    CHECK(batch[2].info() == "imgshape");
    CHECK(batch[0].nbytes() * 3 < images.nbytes());
    CHECK(holds_compressed_images(batch));
    decompress_images(batch, {}, 2);
    REQUIRE(batch.size() == 1);
    CHECK(batch[0].shape() == images.shape());
    CHECK(psnr(batch[0], images) > 35);  // pixel noise of +-6 is the hard part for JPEG
  }
}

TEST_CASE("the lossless wire gives back every pixel") {
  for (const bool planar : {false, true}) {
    CAPTURE(planar);
    const Tensor images = photo_like(4, 33, 47, planar, 5);
    TensorList batch = compress_images(images, parse_wire_format("zstd"), 2);
    CHECK(batch[0].info() == (planar ? "zstdchw" : "zstd"));
    CHECK(batch[0].nbytes() < images.nbytes());
    decompress_images(batch, {}, 3);
    REQUIRE(batch.size() == 1);
    CHECK(batch[0].same_as(images));
  }
}

TEST_CASE("malformed zstd streams are refused by name") {
  auto zstd_batch = [] { return compress_images(photo_like(2, 16, 16, false), parse_wire_format("zstd:3"), 1); };
  SUBCASE("a frame of another size than declared") {
    TensorList batch = zstd_batch();
    batch[2].values<std::int32_t>()[1] = 17;
    check_refused(batch, "image 0: a zstd frame of 768 bytes where the batch declares 816");
  }
  SUBCASE("bytes that are not a frame") {
    TensorList batch = zstd_batch();
    std::memset(batch[0].data(), 0x41, 4);
    check_refused(batch, "image 0: not a zstd frame");
  }
  SUBCASE("a corrupt frame") {
    TensorList batch = zstd_batch();
    const std::int32_t* off = offsets_of(batch);
    std::memset(batch[0].data() + off[1] + 8, 0xff, static_cast<std::size_t>(off[2] - off[1] - 8));
    check_refused(batch, "image 1: zstd: ");
  }
}

TEST_CASE("the other tensors of the batch stay where they were") {
  TensorList batch = compressed_batch(4);
  const Tensor labels = batch[3];
  decompress_images(batch, {}, 1);
  REQUIRE(batch.size() == 2);
  CHECK(batch[0].shape() == Shape{4, 16, 16, 3});
  CHECK(batch[1].same_as(labels));
  TensorList plain{labels};
  decompress_images(plain, {}, 1);
  CHECK(plain.size() == 1);
}

TEST_CASE("an empty batch compresses to no streams") {
  TensorList batch = compress_images(Tensor::allocate(DType::kUInt8, {0, 8, 8, 3}), jpeg(), 4);
  CHECK(batch[0].nbytes() == 0);
  decompress_images(batch, {}, 4);
  CHECK(batch[0].shape() == Shape{0, 8, 8, 3});
}

TEST_CASE("quality and chroma trade bytes for fidelity") {
  const Tensor images = photo_like(2, 64, 64, false);
  auto bytes = [&](const char* wire) { return compress_images(images, parse_wire_format(wire), 1)[0].nbytes(); };
  CHECK(bytes("jpeg:60") < bytes("jpeg:95"));
  CHECK(bytes("jpeg:95,420") < bytes("jpeg:95,444"));
}

TEST_CASE("--wire's text") {
  CHECK(parse_wire_format("raw").kind == WireFormat::Kind::kRaw);
  const WireFormat plain = parse_wire_format("jpeg");
  CHECK((plain.kind == WireFormat::Kind::kJpeg && plain.quality == 95 && !plain.chroma_420));
  CHECK(parse_wire_format("jpeg:80").quality == 80);
  CHECK(parse_wire_format("jpeg:80,420").chroma_420);
  CHECK(parse_wire_format("jpeg,420").chroma_420);
  CHECK(parse_wire_format("jpeg:90,444").describe() == "jpeg:90,444");
  CHECK(parse_wire_format("raw").describe() == "raw");
  CHECK(parse_wire_format("zstd").kind == WireFormat::Kind::kZstd);
  CHECK(parse_wire_format("zstd").zstd_level == 1);
  CHECK(parse_wire_format("zstd:9").describe() == "zstd:9");
  CHECK_THROWS_WITH_AS((void)parse_wire_format("zstd:20"), doctest::Contains("the zstd level must be 1 to 19"),
                       ArgumentError);
  CHECK_THROWS_WITH_AS((void)parse_wire_format("png"), doctest::Contains("expected raw, jpeg"), ArgumentError);
  CHECK_THROWS_WITH_AS((void)parse_wire_format("jpegx"), doctest::Contains("expected raw, jpeg"), ArgumentError);
  CHECK_THROWS_WITH_AS((void)parse_wire_format("jpeg:0"), doctest::Contains("1 to 100, not '0'"), ArgumentError);
  CHECK_THROWS_WITH_AS((void)parse_wire_format("jpeg:95x"), doctest::Contains("not '95x'"), ArgumentError);
  CHECK_THROWS_WITH_AS((void)parse_wire_format("jpeg:90,422"), doctest::Contains("444 or 420, not '422'"),
                       ArgumentError);
}

TEST_CASE("only uint8 RGB images compress") {
  CHECK_THROWS_AS((void)compress_images(Tensor::allocate(DType::kFloat32, {1, 8, 8, 3}), jpeg(), 1), ArgumentError);
  CHECK_THROWS_AS((void)compress_images(Tensor::allocate(DType::kUInt8, {1, 8, 8, 4}), jpeg(), 1), ArgumentError);
  CHECK_THROWS_AS((void)compress_images(Tensor::allocate(DType::kUInt8, {8, 8, 3}), jpeg(), 1), ArgumentError);
  CHECK_THROWS_AS((void)compress_images(photo_like(1, 8, 8, false), parse_wire_format("raw"), 1), ArgumentError);
}

TEST_CASE("malformed compressed images are refused by name, the batch kept") {
  SUBCASE("a stream of other dimensions than declared") {
    TensorList batch = compressed_batch();
    batch[2].values<std::int32_t>()[2] = 24;  // width 24 declared, the streams are 16 wide
    check_refused(batch, "image 0: a 16x16 JPEG of 3 components where the batch declares 24x16 RGB");
  }
  SUBCASE("a truncated stream") {
    TensorList batch = compressed_batch();
    const std::int32_t* off = offsets_of(batch);
    const std::int32_t cut = 40;  // image 1 loses its last 40 bytes
    Tensor streams = Tensor::allocate(DType::kUInt8, {off[3] - cut}, "jpeg");
    std::memcpy(streams.data(), batch[0].data(), static_cast<std::size_t>(off[2] - cut));
    std::memcpy(streams.data() + off[2] - cut, batch[0].data() + off[2], static_cast<std::size_t>(off[3] - off[2]));
    const std::vector<std::int32_t> shorter{0, off[1], off[2] - cut, off[3] - cut};
    batch[0] = streams;
    batch[1] = Tensor::from_values<std::int32_t>({4}, shorter, "imgoff");
    check_refused(batch, "image 1: ");
  }
  SUBCASE("bytes that are not a JPEG") {
    TensorList batch = compressed_batch();
    std::memset(batch[0].data(), 0x41, 8);
    check_refused(batch, "image 0: ");
  }
  SUBCASE("offsets out of order") {
    TensorList batch = compressed_batch();
    std::swap(offsets_of(batch)[1], offsets_of(batch)[2]);
    check_refused(batch, "offsets out of order at image 1");
  }
  SUBCASE("offsets past the streams") {
    TensorList batch = compressed_batch();
    offsets_of(batch)[3] += 1;
    check_refused(batch, "offsets span bytes 0 to");
  }
  SUBCASE("a shape for another count of images") {
    TensorList batch = compressed_batch();
    batch[2].values<std::int32_t>()[0] = 2;
    check_refused(batch, "for 3 streams");
  }
  SUBCASE("a shape that is not RGB") {
    TensorList batch = compressed_batch();
    batch[2].values<std::int32_t>()[3] = 4;
    check_refused(batch, "is not RGB images");
  }
  SUBCASE("a declared size over the limit: no memory for it") {
    TensorList batch = compressed_batch();
    batch[2].values<std::int32_t>()[1] = 65535;
    batch[2].values<std::int32_t>()[2] = 65535;
    check_refused(batch, "over the limit");
  }
  SUBCASE("tensors of the wrong types") {
    TensorList batch = compressed_batch();
    batch[2] = Tensor::from_values<std::int64_t>({4}, std::vector<std::int64_t>{3, 16, 16, 3}, "imgshape");
    check_refused(batch, "the shape is not four int32");
    batch = compressed_batch();
    batch[1] = Tensor::from_values<std::int64_t>({4}, std::vector<std::int64_t>{0, 1, 2, 3}, "imgoff");
    check_refused(batch, "the offsets are not an int32 vector");
  }
}

TEST_CASE("a compressed batch counts its images") {
  const TensorList batch = compressed_batch(5);
  CHECK(compressed_image_count(batch) == 5u);
  CHECK(!compressed_image_count(TensorList(batch.begin() + 1, batch.end())).has_value());
  CHECK(!compressed_image_count(TensorList{}).has_value());
}
