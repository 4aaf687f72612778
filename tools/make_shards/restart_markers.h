// Lossless rewriting of JPEGs with a restart marker after every MCU, as
// jpegtran -restart 1B -optimize does. The coefficients stay the same, so the
// pixels do; only the entropy coding changes (Huffman tables are optimised,
// which pays back most of the markers' 2 bytes an MCU). Augmentation servers
// cut such files at the markers and entropy-decode only the part their crop
// needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorcom/formats/file_io.h"
#include "tensorcom/formats/shard_reader.h"

namespace make_shards {

// Returns jpeg rewritten as above, progressive files as sequential ones,
// with its APPn and COM segments kept. Throws tensorcom::FormatError with
// libjpeg's message and where it stopped reading if jpeg cannot be read
// (truncated files included), has more than max_pixels pixels, or more
// scans than libjpeg_errors.h allows (the servers' limits).
[[nodiscard]] tensorcom::formats::ByteBuffer with_restart_markers(std::span<const std::byte> jpeg,
                                                                  std::uint64_t max_pixels = std::uint64_t{1} << 28);

// --restart-markers on one image: rewrites it in place; one libjpeg cannot
// read is left as it was (the servers will skip and count it). Returns why it
// was left as it was, if it was.
std::optional<std::string> add_restart_markers(tensorcom::formats::ByteBuffer& image);

// Whether a shard member is a JPEG by webdataset's extension: its last
// dotted part is jpg or jpeg ("jpg", "left.jpeg").
[[nodiscard]] bool is_jpeg_member(const tensorcom::formats::ShardMember& member);

// --restart-markers on a sample read from a shard (make-shards
// --from-shards): rewrites its JPEG members in place. Returns, per member,
// why it was left as it was (nothing for the rewritten and the non-JPEG).
[[nodiscard]] std::vector<std::optional<std::string>> add_restart_markers(
    std::vector<tensorcom::formats::ShardMember>& members);

}  // namespace make_shards
