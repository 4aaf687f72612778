// Lossless rewriting of JPEGs with a restart marker after every MCU, as
// jpegtran -restart 1B -optimize does. The coefficients stay the same, so the
// pixels do; only the entropy coding changes (Huffman tables are optimised,
// which pays back most of the markers' 2 bytes an MCU). Augmenters cut
// such files at the markers and entropy-decode only the part their crop
// needs (docs/jpeg.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "tensorcom/codec/byte_buffer.h"

namespace tensorcom::imaging {

// Returns jpeg rewritten as above, progressive files as sequential ones,
// with its APPn and COM segments kept. Throws tensorcom::FormatError with
// libjpeg's message and where it stopped reading if jpeg cannot be read
// (truncated files included), has more than max_pixels pixels, or more
// scans than the region decoder allows (the servers' limits).
[[nodiscard]] ByteBuffer with_restart_markers(std::span<const std::byte> jpeg,
                                              std::uint64_t max_pixels = std::uint64_t{1} << 28);

// --restart-markers on one image: rewrites it in place; one libjpeg cannot
// read is left as it was (the servers will skip and count it). Returns why it
// was left as it was, if it was.
std::optional<std::string> add_restart_markers(ByteBuffer& image);

}  // namespace tensorcom::imaging
