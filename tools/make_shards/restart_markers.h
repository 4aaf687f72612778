// Lossless rewriting of JPEGs with a restart marker after every MCU, as
// jpegtran -restart 1B -optimize does. The coefficients stay the same, so the
// pixels do; only the entropy coding changes (Huffman tables are optimised,
// which pays back most of the markers' 2 bytes an MCU). Augmentation servers
// cut such files at the markers and entropy-decode only the part their crop
// needs.
#pragma once

#include <span>
#include <string>

#include "file_io.h"

namespace make_shards {

// Returns jpeg rewritten as above, progressive files as sequential ones,
// with its APPn and COM segments kept. Throws tensorcom::FormatError with
// libjpeg's message and where it stopped reading if jpeg cannot be read
// (truncated files included).
[[nodiscard]] Bytes with_restart_markers(std::span<const unsigned char> jpeg);

}  // namespace make_shards
