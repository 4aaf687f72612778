// An image's format and dimensions, read from its first bytes before any
// decoding. The bytes decide, never a file name: shards in the wild mislabel
// their members. Two uses beyond dispatch: the pixel limit refuses a small
// PNG that claims 100000 x 100000 pixels before a decoder allocates them,
// and only the formats known here are handed to OpenCV at all. Its other
// decoders (DICOM, JPEG 2000, OpenEXR, Radiance, ...) read formats no image
// dataset uses, and some abort the whole process on a malformed file: GDCM
// asserts on 128 bytes followed by "DICM".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace tensorcom::imaging {

enum class ImageFormat : std::uint8_t { kUnknown, kJpeg, kPng, kPnm, kBmp, kWebp };

// "jpeg", "png", "pnm", "bmp", "webp" or "unknown".
[[nodiscard]] std::string_view format_name(ImageFormat format) noexcept;

// The format the signature at the start of bytes names: JPEG's SOI marker
// followed by another marker, PNG's, PNM's "P1".."P6", BMP's "BM", WebP's
// RIFF container. Signatures only: the file may still be damaged.
[[nodiscard]] ImageFormat sniff_format(std::span<const std::byte> bytes) noexcept;

struct ImageSize {
  std::uint64_t width = 0;
  std::uint64_t height = 0;
  bool operator==(const ImageSize&) const = default;
};

// The dimensions the header declares (for a JPEG, its frame header: the
// markers before it are walked by their lengths), or nothing for an unknown
// format and for a header too short or malformed to tell.
[[nodiscard]] std::optional<ImageSize> peek_image_size(std::span<const std::byte> bytes) noexcept;

}  // namespace tensorcom::imaging
