// Internal: skipping the entropy decoding outside a crop, for JPEGs with
// restart markers at every MCU or at MCU-row boundaries.
//
// Huffman-coded data can only be decoded from its start, so a region decoder
// still pays for every MCU before the last one of its box: on photos, most
// of a JPEG's decoding time. A restart marker resets the decoder (DC
// predictions, bit buffer), so when restart intervals are single MCUs or
// whole MCU rows, any rectangle of intervals forms a JPEG of its own: the
// same headers with a smaller width and height, then those intervals' data
// with the markers renumbered from 0. This cuts that JPEG out; decoding it
// gives exactly the pixels the original has there.
//
// `make-shards --restart-markers` writes such files, losslessly
// (restart_markers.h). docs/jpeg.md describes the design.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "jpeg/byte_range.h"
#include "tensorcom/imaging/geometry.h"

namespace tensorcom::imaging {

// Writes to out a JPEG holding the box `slice` of jpeg (returned): the
// smallest rectangle of whole restart intervals that covers `want` and
// `context` pixels more on every side. A decoder whose pixels depend on
// nothing further than `context` from them (chroma upsampling looks at the
// neighbouring chroma pixel: decoder_context() in jpeg_region.h) gives the
// pixels of `want` from the slice exactly as it does from jpeg.
// Returns nothing when slicing would skip nothing (unless `unstuffed` is
// given: see below), or when the file is not a
// single-scan sequential JPEG with such restart intervals and all of its
// markers present and in order. Never throws on malformed input: the caller
// decodes the whole file then, and its decoder reports what is wrong.
// REQUIRES: want is non-empty and lies inside the image.
// Where each of the slice's restart intervals lies in out goes to
// *intervals, when given (for JpegIntervalDecoder).
//
// With `unstuffed` too, out holds the slice's headers only, and the
// intervals go to *unstuffed instead, ready for JpegIntervalDecoder's
// `unstuffed` mode (their stuffing taken out, zeros after each): their
// bytes are then copied once, not twice. Only that decoder can decode such
// a slice: libjpeg would find no data after the scan header. A slice is then
// made even when it skips nothing: that decoder reads a file with restart
// markers much faster than libjpeg-turbo does.
[[nodiscard]] std::optional<PixelBox> slice_restart_intervals(std::span<const std::byte> jpeg, const PixelBox& want,
                                                              int context, std::vector<std::byte>& out,
                                                              std::vector<ByteRange>* intervals = nullptr,
                                                              std::vector<std::byte>* unstuffed = nullptr);

}  // namespace tensorcom::imaging
