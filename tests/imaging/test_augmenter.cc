// Decoding and augmenting images: colour handling of every kind of input,
// the region-decoding JPEG path against a full decode, and bad input.
#include <doctest/doctest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cstdio>
#include <jpeglib.h>

#include "tensorcom/imaging/augmenter.h"
#include "libjpeg_encode.h"
#include "opencv_encode.h"

using namespace tensorcom::imaging;
using testing::encode;

namespace {

// A test picture: a smooth dark background and a white square near the top
// left, so that a misplaced crop shows as a moved square.
cv::Mat picture(int width, int height) {
  cv::Mat bgr(height, width, CV_8UC3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      bgr.at<cv::Vec3b>(y, x) =
          cv::Vec3b(static_cast<std::uint8_t>(x * 100 / width), static_cast<std::uint8_t>(y * 100 / height), 40);
    }
  }
  cv::rectangle(bgr, cv::Rect(width / 4, height / 4, width / 5, height / 5), cv::Scalar(255, 255, 255), cv::FILLED);
  return bgr;
}

// The centre of the bright pixels, or (-1, -1) if there are none.
cv::Point2d bright_centroid(const cv::Mat& rgb) {
  cv::Mat grey, mask;
  cv::cvtColor(rgb, grey, cv::COLOR_RGB2GRAY);
  cv::threshold(grey, mask, 180, 255, cv::THRESH_BINARY);
  cv::Moments m = cv::moments(mask, true);
  if (m.m00 < 4) return {-1, -1};
  return {m.m10 / m.m00, m.m01 / m.m00};
}

cv::Mat run(ImageAugmenter& augmenter, const std::vector<std::byte>& bytes, std::uint64_t seed = 1) {
  cv::Mat out(augmenter.output().height, augmenter.output().width, CV_8UC3);
  auto rng = std::mt19937_64(seed);
  augmenter.augment(bytes, rng, out.data);
  return out;
}

cv::Scalar mean_rgb(const cv::Mat& rgb) { return cv::mean(rgb); }

// A JPEG in CMYK written with libjpeg, Adobe-style (inverted ink values).
std::vector<std::byte> cmyk_jpeg(int width, int height, std::uint8_t c, std::uint8_t m, std::uint8_t y,
                                 std::uint8_t k) {
  auto fill_row = [&](int, unsigned char* row) {
    for (int x = 0; x < width; ++x) {
      row[x * 4 + 0] = c;
      row[x * 4 + 1] = m;
      row[x * 4 + 2] = y;
      row[x * 4 + 3] = k;
    }
  };
  return testing::libjpeg_encode(
      width, height, 4, JCS_CMYK, 95, [](jpeg_compress_struct&) {}, fill_row);
}

}  // namespace

TEST_CASE("colours of every kind of input come out RGB") {
  AugmentOptions options;
  const int size = 32;
  options.validation = true;
  ImageAugmenter augmenter(options, size);
  cv::Mat red(120, 160, CV_8UC3, cv::Scalar(20, 30, 220));  // BGR: mostly red

  auto check_red = [&](const cv::Mat& out) {
    cv::Scalar m = mean_rgb(out);
    CHECK(m[0] == doctest::Approx(220).epsilon(0.03));
    CHECK(m[1] == doctest::Approx(30).epsilon(0.15));
    CHECK(m[2] == doctest::Approx(20).epsilon(0.2));
  };
  SUBCASE("baseline JPEG") { check_red(run(augmenter, encode(red, ".jpg"))); }
  SUBCASE("progressive JPEG") { check_red(run(augmenter, encode(red, ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1}))); }
#if TENSORCOM_OPENCV_CODECS
  SUBCASE("PNG") { check_red(run(augmenter, encode(red, ".png"))); }
  SUBCASE("PPM") { check_red(run(augmenter, encode(red, ".ppm"))); }
  SUBCASE("16-bit PNG") {
    cv::Mat deep;
    red.convertTo(deep, CV_16U, 257.0);
    check_red(run(augmenter, encode(deep, ".png")));
  }
  SUBCASE("PNG with alpha") {
    cv::Mat bgra;
    cv::cvtColor(red, bgra, cv::COLOR_BGR2BGRA);
    check_red(run(augmenter, encode(bgra, ".png")));
  }
#else
  SUBCASE("a JPEG-only build refuses PNG as undecodable, naming why") {
    try {
      (void)run(augmenter, encode(red, ".png"));
      FAIL("a PNG was decoded by a build without OpenCV's codecs");
    } catch (const ImageError& e) {
      CHECK(e.problem() == Problem::kUndecodable);
      CHECK(std::string(e.what()).find("decodes JPEG only") != std::string::npos);
    }
  }
#endif
  SUBCASE("greyscale JPEG") {
    cv::Mat grey(100, 100, CV_8UC1, cv::Scalar(90));
    cv::Scalar m = mean_rgb(run(augmenter, encode(grey, ".jpg")));
    CHECK(m[0] == doctest::Approx(90).epsilon(0.03));
    CHECK(m[1] == doctest::Approx(m[0]));
    CHECK(m[2] == doctest::Approx(m[0]));
  }
  SUBCASE("CMYK JPEG (Adobe inverted)") {
    // Stored inverted: C=255 (no cyan), M=55, Y=55 -> R = 255, G = B = 55 at K=255 (no black).
    cv::Scalar m = mean_rgb(run(augmenter, cmyk_jpeg(64, 48, 255, 55, 55, 255)));
    CHECK(m[0] == doctest::Approx(255).epsilon(0.03));
    CHECK(m[1] == doctest::Approx(55).epsilon(0.1));
    CHECK(m[2] == doctest::Approx(55).epsilon(0.1));
  }
}

TEST_CASE("the region decoder crops what a full decode would") {
  cv::Mat bgr = picture(640, 480);
  auto jpeg = encode(bgr, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 95});
  for (bool validation : {true, false}) {
    for (int size : {64, 224}) {
      CAPTURE(validation);
      CAPTURE(size);
      AugmentOptions options;
      options.validation = validation;
      options.flip_probability = 0;  // compare crops only
      ImageAugmenter augmenter(options, size);
      for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        CAPTURE(seed);
        cv::Mat fast = run(augmenter, jpeg, seed);
        // The same crop from a full OpenCV decode, resized the same way.
        auto rng = std::mt19937_64(seed);
        PixelBox box = validation
                           ? resize_center_crop_transform(
                                 640, 480, {.shorter = static_cast<int>(std::lround(size * 256.0 / 224))}, {size, size})
                                 .source_box()
                           : random_resized_crop(640, 480, options.crop, rng);
        cv::Mat full = cv::imdecode(cv::Mat(1, static_cast<int>(jpeg.size()), CV_8U, jpeg.data()), cv::IMREAD_COLOR);
        cv::Mat rgb, reference;
        cv::cvtColor(full(cv::Rect(box.x, box.y, box.width, box.height)), rgb, cv::COLOR_BGR2RGB);
        cv::resize(rgb, reference, cv::Size(size, size), 0, 0, cv::INTER_AREA);
        cv::Mat diff;
        cv::absdiff(fast, reference, diff);
        CHECK(cv::mean(diff)[0] < 6.0);
        // DCT downscaling filters differently from INTER_AREA, but the square
        // must land where a full decode puts it.
        cv::Point2d expected = bright_centroid(reference), actual = bright_centroid(fast);
        if (expected.x >= 0) {
          CHECK(std::abs(actual.x - expected.x) < 1.0);
          CHECK(std::abs(actual.y - expected.y) < 1.0);
        }
      }
    }
  }
}

TEST_CASE("training transform") {
  AugmentOptions options;
  const int size = 48;
  ImageAugmenter augmenter(options, size);
  auto jpeg = encode(picture(300, 200), ".jpg");
  SUBCASE("the same seed gives the same image, another seed another") {
    cv::Mat a = run(augmenter, jpeg, 11), b = run(augmenter, jpeg, 11), c = run(augmenter, jpeg, 12);
    CHECK(cv::norm(a, b, cv::NORM_L1) == 0);
    CHECK(cv::norm(a, c, cv::NORM_L1) > 0);
  }
  SUBCASE("flipping mirrors the image") {
    options.flip_probability = 1.0;
    ImageAugmenter always(options, size);
    options.flip_probability = 0.0;
    ImageAugmenter never(options, size);
    cv::Mat flipped = run(always, jpeg, 5), plain = run(never, jpeg, 5), mirrored;
    cv::flip(plain, mirrored, 1);
    CHECK(cv::norm(flipped, mirrored, cv::NORM_L1) == 0);
  }
  SUBCASE("tiny images are scaled up") {
    cv::Mat out = run(augmenter, encode(picture(9, 7), ".jpg"));
    CHECK(out.rows == 48);
  }
}

TEST_CASE("bad images are refused with a reason") {
  AugmentOptions options;
  const int size = 32;
  ImageAugmenter augmenter(options, size);
  auto jpeg = encode(picture(200, 150), ".jpg");
  auto reason = [&](const std::vector<std::byte>& bytes) -> std::string {
    try {
      (void)run(augmenter, bytes);
    } catch (const ImageError& e) {
      return std::string(problem_name(e.problem()));
    }
    return "accepted";
  };
  SUBCASE("empty") { CHECK(reason({}) == "empty"); }
  SUBCASE("truncated JPEG") {
    auto cut = jpeg;
    cut.resize(cut.size() / 2);
    CHECK(reason(cut) == "truncated");
  }
  SUBCASE("a JPEG cut in its last rows is truncated wherever the crop falls") {
    auto cut = jpeg;
    cut.resize(cut.size() * 19 / 20);
    for (int i = 0; i < 20; ++i) CHECK(reason(cut) == "truncated");  // each draws another crop
  }
  SUBCASE("bytes after the end-of-image marker are tolerated") {
    auto trailed = jpeg;
    trailed.resize(trailed.size() + 300, std::byte{0x5a});
    CHECK(reason(trailed) == "accepted");
  }
  SUBCASE("a JPEG header followed by garbage") {
    auto bad = jpeg;
    for (std::size_t i = 20; i < bad.size(); ++i) bad[i] = static_cast<std::byte>(i * 31);
    CHECK(reason(bad) == "undecodable");
  }
  SUBCASE("not an image") { CHECK(reason(std::vector<std::byte>(100, std::byte{'x'})) == "undecodable"); }
  SUBCASE("formats outside PNG, PNM, BMP and WebP never reach OpenCV") {
    // OpenCV's DICOM reader (GDCM) aborts the process on these bytes.
    std::vector<std::byte> dicom(128, std::byte{0});
    for (char c : std::string("DICM\0"
                              "0a",
                              7))
      dicom.push_back(static_cast<std::byte>(c));
    CHECK(reason(dicom) == "undecodable");
    // A WebP header that libwebp refuses: OpenCV's WebP decoder would pass it
    // on, and its DICOM reader would take it for the marker at 128.
    std::string riff = std::string("RIFF\x64\0\0\0WEBPVP8 ", 16) + std::string(16, '\xff');
    std::vector<std::byte> bad_webp(riff.size());
    std::memcpy(bad_webp.data(), riff.data(), riff.size());
    bad_webp.resize(128, std::byte{0});
    bad_webp.insert(bad_webp.end(), dicom.begin() + 128, dicom.end());
    CHECK(reason(bad_webp) == "undecodable");
    // A Radiance HDR header, which OpenCV would decode through a temporary file.
    std::string hdr = "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 2\n" + std::string(16, '\x80');
    std::vector<std::byte> radiance(hdr.size());
    std::memcpy(radiance.data(), hdr.data(), hdr.size());
    CHECK(reason(radiance) == "undecodable");
  }
  SUBCASE("too many pixels") {
    options.max_pixels = 1000;
    ImageAugmenter strict(options, size);
    cv::Mat out(32, 32, CV_8UC3);
    auto rng = std::mt19937_64(1);
    CHECK_THROWS_WITH_AS(strict.augment(jpeg, rng, out.data), doctest::Contains("200x150"), ImageError);
  }
  SUBCASE("a JPEG that claims far more pixels than its bytes can hold") {
    // The frame header's height and width, patched: libjpeg would decode the
    // 16000x16000 it claims, inventing grey where the data ends.
    auto forged = jpeg;
    const auto sof = std::find_if(forged.begin(), forged.end() - 9, [&](const std::byte& b) {
      const auto i = static_cast<std::size_t>(&b - forged.data());
      return b == std::byte{0xFF} && forged[i + 1] == std::byte{0xC0};
    });
    REQUIRE(sof != forged.end() - 9);
    const auto at = static_cast<std::size_t>(sof - forged.begin()) + 5;  // marker, length, precision
    for (std::size_t k : {0, 2}) {
      forged[at + k] = std::byte{16000 >> 8};
      forged[at + k + 1] = std::byte{16000 & 0xFF};
    }
    CHECK(forged.size() < 20000);
    CHECK_THROWS_WITH_AS((void)run(augmenter, forged), doctest::Contains("16000x16000 claimed by"), ImageError);
    CHECK(reason(forged) == "too many pixels");
  }
  SUBCASE("a progressive scan bomb is refused quickly") {
    auto grey = [](int, unsigned char* row) { std::memset(row, 128, 1024); };
    auto progressive = testing::libjpeg_encode(
        1024, 1024, 1, JCS_GRAYSCALE, 90, [](jpeg_compress_struct& c) { jpeg_simple_progression(&c); }, grey);
    CHECK(reason(progressive) == "accepted");  // about 10 scans
    CHECK(reason(testing::with_repeated_last_scan(progressive, 50)) == "accepted");
    // Stopped at the 101st scan, before the other 900 cost their passes.
    CHECK(reason(testing::with_repeated_last_scan(progressive, 1000)) == "too many scans");
  }
  SUBCASE("a PPM whose declared size overflows 64 bits is still too many pixels") {
    const std::string ppm = "P6 4294967296 4294967296 255\n";  // 2^32 x 2^32 wraps to 0
    std::vector<std::byte> bytes(ppm.size());
    std::memcpy(bytes.data(), ppm.data(), ppm.size());
    CHECK(reason(bytes) == "too many pixels");
  }
  SUBCASE("a PNG declaring more pixels than the limit is refused before decoding") {
    // 40000 x 40000 grey would take 1.6 GB to decode; the header alone says no.
    cv::Mat small(4, 4, CV_8UC1, cv::Scalar(0));
    auto png = encode(small, ".png");
    const std::uint8_t huge[8] = {0, 0, 0x9c, 0x40, 0, 0, 0x9c, 0x40};  // IHDR width, height: 40000
    std::memcpy(png.data() + 16, huge, sizeof huge);
    auto rng = std::mt19937_64(1);
    cv::Mat out(32, 32, CV_8UC3);
    CHECK_THROWS_WITH_AS(augmenter.augment(png, rng, out.data), doctest::Contains("40000x40000"), ImageError);
  }
  SUBCASE("the decoder recovers after a bad image") {
    auto cut = jpeg;
    cut.resize(cut.size() / 3);
    CHECK(reason(cut) != "accepted");
    CHECK(reason(jpeg) == "accepted");
  }
}
