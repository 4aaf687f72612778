// A sample as read from a shard or folder, before decoding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tensorcom/formats/file_io.h"

namespace tensorcom::pipeline {

using formats::ByteBuffer;

struct RawSample {
  std::string key;                          // webdataset key, or the file's path for a folder image
  std::string shard;                        // the shard (or file) it came from, as named by the user
  std::optional<ByteBuffer> image;          // the encoded image; nothing if the sample has none
  std::optional<std::string> label;         // text of the "cls" member, if any
  std::optional<std::int32_t> known_label;  // a label known without text (ImageFolder)
  std::uint64_t oversized_image = 0;        // bytes of an image member (or file) passed over for its size; 0: none
  // What the image weighs in buffers, the same whether its bytes were read
  // (a replay's are not): its size, or the head kept of a non-image.
  std::uint64_t image_bytes = 0;
  // An image listed unread where its unit can be read again at an offset (a
  // resumed epoch's): its bytes start there (SampleSource::read_image).
  std::optional<std::uint64_t> image_offset;
  std::optional<std::string> unreadable;  // why the image file could not be read, if it could not
  std::uint64_t epoch = 0;                // the epoch it was read in (from 0): sets its output size
  std::uint64_t position = 0;             // its place in the epoch's order: sets its batch and augmentation
  std::size_t unit = 0;                   // the shard (or file) it was read from, as the source numbers them
};

// What a buffered sample costs in memory, near enough to budget by (an
// unread image weighs as much as a read one, so that a replay's buffers
// fill exactly as the original's did).
inline std::size_t buffered_bytes(const RawSample& sample) {
  return sizeof(RawSample) + sample.key.size() + sample.shard.size() + sample.image_bytes +
         (sample.label ? sample.label->size() : 0);
}

// Whether a sample may be served, as far as can be told without decoding
// it: it has image bytes that could be read, within the size limit. One
// that cannot (no image or an empty one, a file that could not be read, an
// image passed over for its size) never stands in for another, and costs
// no place in the windows of candidates. Read the same whether or not its
// bytes were read (a resumed epoch's are not), so that resumed epochs pick
// the same replacements.
inline bool may_be_servable(const RawSample& sample) {
  return !sample.unreadable && sample.oversized_image == 0 && sample.image_bytes > 0;
}

}  // namespace tensorcom::pipeline
