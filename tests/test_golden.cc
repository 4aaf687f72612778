// The golden .ten files written by the Python reference: each decodes to the
// generated values and re-encodes byte for byte. Skipped (77) when the golden
// directory is absent.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include "tensorcom/codec/half.h"
#include "tensorcom/codec/ten_file.h"

using namespace tensorcom;
namespace fs = std::filesystem;

namespace {

fs::path golden_dir() {
  const char* dir = std::getenv("TENSORCOM_GOLDEN_DIR");
  return dir ? fs::path(dir) : fs::path();
}

std::vector<char> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// golden.json: values[k] = ((7k + 3) mod 251) - 100, |.| for unsigned dtypes,
// /8 for floats, then cast to the dtype (wrapping, as NumPy's astype does).
double expected_value(DType dtype, std::uint64_t k) {
  auto v = static_cast<std::int64_t>((7 * k + 3) % 251) - 100;
  switch (dtype) {
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64: return static_cast<double>(v) / 8.0;
    case DType::kInt8: return static_cast<std::int8_t>(v);
    case DType::kInt16: return static_cast<std::int16_t>(v);
    case DType::kInt32: return static_cast<std::int32_t>(v);
    case DType::kInt64: return static_cast<double>(v);
    default: return static_cast<double>(v < 0 ? -v : v);
  }
}

template <class T>
double element(const Tensor& t, std::uint64_t k) {
  return static_cast<double>(t.values<T>()[k]);
}

double actual_value(const Tensor& t, std::uint64_t k) {
  switch (t.dtype()) {
    case DType::kFloat16: return half_to_float(t.values<std::uint16_t>()[k]);
    case DType::kFloat32: return element<float>(t, k);
    case DType::kFloat64: return element<double>(t, k);
    case DType::kInt8: return element<std::int8_t>(t, k);
    case DType::kInt16: return element<std::int16_t>(t, k);
    case DType::kInt32: return element<std::int32_t>(t, k);
    case DType::kInt64: return element<std::int64_t>(t, k);
    case DType::kUInt8: return element<std::uint8_t>(t, k);
    case DType::kUInt16: return element<std::uint16_t>(t, k);
    case DType::kUInt32: return element<std::uint32_t>(t, k);
    case DType::kUInt64: return element<std::uint64_t>(t, k);
  }
  return NAN;
}

struct Expected {
  DType dtype;
  Shape shape;
  std::string info;
};

// What golden.json lists for each file.
const std::vector<std::pair<std::string, std::vector<Expected>>>& golden_cases() {
  using enum DType;
  static const std::vector<std::pair<std::string, std::vector<Expected>>> cases = {
      {"float32_2x3.ten", {{kFloat32, {2, 3}, ""}}},
      {"pair_img_cls.ten", {{kFloat32, {2, 3}, "img"}, {kInt32, {2}, "cls"}}},
      {"batch_u8_i32.ten", {{kUInt8, {4, 8, 8, 3}, ""}, {kInt32, {4}, ""}}},
      {"all_dtypes.ten",
       {{kFloat16, {3, 5}, "float16"},
        {kFloat32, {3, 5}, "float32"},
        {kFloat64, {3, 5}, "float64"},
        {kInt8, {3, 5}, "int8"},
        {kInt16, {3, 5}, "int16"},
        {kInt32, {3, 5}, "int32"},
        {kInt64, {3, 5}, "int64"},
        {kUInt8, {3, 5}, "uint8"},
        {kUInt16, {3, 5}, "uint16"},
        {kUInt64, {3, 5}, "uint64"}}},
      {"empty_0x5.ten", {{kUInt8, {0, 5}, ""}}},
      {"rank1_len1.ten", {{kInt16, {1}, "x"}}},
      {"odd_sizes.ten", {{kUInt8, {1, 63}, "a"}, {kUInt8, {65}, "b"}, {kUInt8, {64}, "c"}, {kInt8, {7, 9, 1}, "d"}}},
      {"rank9.ten", {{kUInt8, {1, 2, 1, 2, 1, 2, 1, 2, 1}, "deep"}}},
      {"info_8chars.ten", {{kFloat16, {2, 2}, "12345678"}}},
  };
  return cases;
}

}  // namespace

TEST_CASE("golden files decode to the generated values and re-encode byte for byte") {
  for (const auto& golden_case : golden_cases()) {
    const std::string& name = golden_case.first;
    const auto& expected = golden_case.second;
    CAPTURE(name);
    fs::path path = golden_dir() / name;
    TensorList list = read_ten(path);
    REQUIRE(list.size() == expected.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      CAPTURE(i);
      CHECK(list[i].dtype() == expected[i].dtype);
      CHECK(list[i].shape() == expected[i].shape);
      CHECK(list[i].info() == expected[i].info);
      for (std::uint64_t k = 0; k < list[i].numel(); ++k) {
        CAPTURE(k);
        CHECK(actual_value(list[i], k) == expected_value(list[i].dtype(), k));
      }
    }
    SharedBuffer again = encode_buffer(list);
    std::vector<char> original = file_bytes(path);
    REQUIRE(again.size() == original.size());
    CHECK(std::memcmp(again.data(), original.data(), original.size()) == 0);
  }
}

TEST_CASE("multipart frame sizes match the reference's") {
  TensorList list = read_ten(golden_dir() / "odd_sizes.ten");
  std::vector<std::size_t> sizes;
  for (const Tensor& t : list) {
    sizes.push_back(header_size(t));
    sizes.push_back(t.nbytes());
  }
  CHECK(sizes == std::vector<std::size_t>{40, 63, 32, 65, 32, 64, 48, 63});
}

int main(int argc, char** argv) {
  if (!fs::is_directory(golden_dir())) {
    std::fprintf(stderr, "golden directory '%s' not found (set TENSORCOM_GOLDEN_DIR): skipped\n", golden_dir().c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
