#include "tensorcom/imaging/format.h"

#include <cstdlib>
#include <cstring>
#include <string_view>

#include <webp/decode.h>

namespace tensorcom::imaging {

namespace {

class Bytes {
 public:
  explicit Bytes(std::span<const std::byte> bytes) : bytes_(bytes) {}
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size(); }
  [[nodiscard]] const std::uint8_t* data() const noexcept {
    return reinterpret_cast<const std::uint8_t*>(bytes_.data());
  }
  [[nodiscard]] unsigned at(std::size_t i) const noexcept { return std::to_integer<unsigned>(bytes_[i]); }
  [[nodiscard]] bool has(std::size_t offset, std::string_view text) const noexcept {
    return offset + text.size() <= bytes_.size() && std::memcmp(bytes_.data() + offset, text.data(), text.size()) == 0;
  }
  [[nodiscard]] std::uint32_t big32(std::size_t i) const noexcept {
    return at(i) << 24 | at(i + 1) << 16 | at(i + 2) << 8 | at(i + 3);
  }
  [[nodiscard]] std::uint32_t little(std::size_t i, int count) const noexcept {
    std::uint32_t v = 0;
    for (int k = count - 1; k >= 0; --k) v = v << 8 | at(i + static_cast<std::size_t>(k));
    return v;
  }

 private:
  std::span<const std::byte> bytes_;
};

// Signature, length, "IHDR", width, height: all big-endian.
std::optional<ImageSize> png_size(const Bytes& b) {
  if (!b.has(0, "\x89PNG\r\n\x1a\n") || !b.has(12, "IHDR") || b.size() < 24) return std::nullopt;
  return ImageSize{b.big32(16), b.big32(20)};
}

// "P1" to "P6" and whitespace (all that OpenCV checks), then width and
// height in ASCII decimal, separated by whitespace and "#" comments that run
// to the end of the line.
std::optional<ImageSize> pnm_size(const Bytes& b) {
  auto is_space = [](unsigned c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  if (b.size() < 3 || b.at(0) != 'P' || b.at(1) < '1' || b.at(1) > '6' || !is_space(b.at(2))) return std::nullopt;
  std::size_t i = 2;
  auto number = [&]() -> std::optional<std::uint64_t> {
    for (;;) {
      while (i < b.size() && is_space(b.at(i))) ++i;
      if (i < b.size() && b.at(i) == '#') {
        while (i < b.size() && b.at(i) != '\n') ++i;
        continue;
      }
      break;
    }
    std::uint64_t value = 0;
    std::size_t digits = 0;
    for (; i < b.size() && b.at(i) >= '0' && b.at(i) <= '9' && digits < 12; ++i, ++digits) {
      value = value * 10 + (b.at(i) - '0');
    }
    if (digits == 0) return std::nullopt;
    return value;
  };
  auto width = number();
  auto height = width ? number() : std::nullopt;
  if (!height) return std::nullopt;
  return ImageSize{*width, *height};
}

// "BM", then the info header: OS/2's 12-byte one holds 16-bit dimensions,
// the others signed 32-bit ones (a negative height means top-down rows).
std::optional<ImageSize> bmp_size(const Bytes& b) {
  if (!b.has(0, "BM") || b.size() < 26) return std::nullopt;
  if (b.little(14, 4) == 12) return ImageSize{b.little(18, 2), b.little(20, 2)};
  auto width = static_cast<std::int32_t>(b.little(18, 4));
  auto height = static_cast<std::int32_t>(b.little(22, 4));
  auto magnitude = [](std::int32_t v) { return static_cast<std::uint64_t>(std::abs(static_cast<std::int64_t>(v))); };
  return ImageSize{magnitude(width), magnitude(height)};
}

// OpenCV claims a file as WebP when libwebp reads features from its first
// 32 bytes; asking libwebp the same question keeps a file that fails it from
// falling through to OpenCV's later decoders.
std::optional<ImageSize> webp_size(const Bytes& b) {
  constexpr std::size_t kOpenCvSignatureBytes = 32;
  if (!b.has(0, "RIFF") || b.size() < kOpenCvSignatureBytes) return std::nullopt;
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(b.data(), kOpenCvSignatureBytes, &features) != VP8_STATUS_OK) return std::nullopt;
  if (features.width <= 0 || features.height <= 0) return std::nullopt;
  return ImageSize{static_cast<std::uint64_t>(features.width), static_cast<std::uint64_t>(features.height)};
}

// The frame header (SOFn, n not 4, 8 or 12: those are DHT, JPG and DAC)
// holds precision, height and width. Markers before it are walked by their
// lengths; fill bytes (FF FF ...) are allowed between them.
std::optional<ImageSize> jpeg_size(const Bytes& b) {
  std::size_t i = 2;
  while (i + 4 <= b.size()) {
    if (b.at(i) != 0xff) return std::nullopt;
    const unsigned marker = b.at(i + 1);
    if (marker == 0xff) {
      ++i;
      continue;
    }
    if (marker == 0xd8 || marker == 0xd9 || marker == 0xda || marker == 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      return std::nullopt;  // no frame header before the scan or the end
    }
    const std::size_t length = b.at(i + 2) << 8 | b.at(i + 3);
    if (length < 2) return std::nullopt;
    const bool frame = marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc;
    if (frame) {
      if (length < 8 || i + 9 > b.size()) return std::nullopt;
      return ImageSize{std::uint64_t{b.at(i + 7)} << 8 | b.at(i + 8), std::uint64_t{b.at(i + 5)} << 8 | b.at(i + 6)};
    }
    i += 2 + length;
  }
  return std::nullopt;
}

}  // namespace

std::string_view format_name(ImageFormat format) noexcept {
  switch (format) {
    case ImageFormat::kJpeg: return "jpeg";
    case ImageFormat::kPng: return "png";
    case ImageFormat::kPnm: return "pnm";
    case ImageFormat::kBmp: return "bmp";
    case ImageFormat::kWebp: return "webp";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat sniff_format(std::span<const std::byte> bytes) noexcept {
  const Bytes b(bytes);
  if (b.size() >= 3 && b.at(0) == 0xff && b.at(1) == 0xd8 && b.at(2) == 0xff) return ImageFormat::kJpeg;
  if (b.has(0, "\x89PNG\r\n\x1a\n")) return ImageFormat::kPng;
  if (b.size() >= 2 && b.at(0) == 'P' && b.at(1) >= '1' && b.at(1) <= '6') return ImageFormat::kPnm;
  if (b.has(0, "BM")) return ImageFormat::kBmp;
  if (b.has(0, "RIFF") && b.has(8, "WEBP")) return ImageFormat::kWebp;
  return ImageFormat::kUnknown;
}

std::optional<ImageSize> peek_image_size(std::span<const std::byte> bytes) noexcept {
  const Bytes b(bytes);
  switch (sniff_format(bytes)) {
    case ImageFormat::kJpeg: return jpeg_size(b);
    case ImageFormat::kPng: return png_size(b);
    case ImageFormat::kPnm: return pnm_size(b);
    case ImageFormat::kBmp: return bmp_size(b);
    case ImageFormat::kWebp: return webp_size(b);
    case ImageFormat::kUnknown: break;
  }
  return std::nullopt;
}

}  // namespace tensorcom::imaging
