// Internal: RGB pixels to a baseline JPEG with libjpeg-turbo, for the
// compressed images of the wire and make-shards' reduced-resolution copies.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensorcom/codec/byte_buffer.h"

namespace tensorcom::jpeg {

struct JpegEncoding {
  int quality = 90;               // libjpeg's 1..100 scale, standard quantisation tables
  bool restart_markers = false;   // a restart marker after every MCU (what the restart slicer cuts at)
  bool optimize_huffman = false;  // Huffman tables made for the image, else the standard ones
  bool chroma_444 = false;        // full-resolution chroma, else 4:2:0
};

// Encodes width x height RGB pixels (rows of width * 3 bytes) as a
// sequential JPEG.
// Throws Error with libjpeg's message if it fails.
// REQUIRES: width, height in 1..65535; quality in 1..100.
[[nodiscard]] ByteBuffer encode_jpeg(const std::uint8_t* rgb, int width, int height, const JpegEncoding& encoding);

}  // namespace tensorcom::jpeg
