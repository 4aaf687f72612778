// The format and dimensions of a non-JPEG image, read from its first bytes
// before any decoding. Two uses: the pixel limit refuses a small PNG that
// claims 100000 x 100000 pixels before a decoder allocates them, and only
// the formats known here (PNG, PNM, BMP, WebP) are handed to OpenCV at all.
// Its other decoders (DICOM, JPEG 2000, OpenEXR, Radiance, ...) read formats
// no image dataset uses, and some abort the whole process on a malformed
// file: GDCM asserts on 128 bytes followed by "DICM".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace tensorcom::pipeline {

struct ImageSize {
  std::uint64_t width = 0;
  std::uint64_t height = 0;
  bool operator==(const ImageSize&) const = default;
};

// The dimensions the header declares, or nothing for any other format and
// for a header too short or malformed to tell.
[[nodiscard]] std::optional<ImageSize> peek_image_size(std::span<const std::byte> bytes) noexcept;

}  // namespace tensorcom::pipeline
