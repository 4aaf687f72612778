// Internal: decoding a box of a JPEG at a DCT scale with libjpeg-turbo's
// partial-decoding calls (jpeg_crop_scanline, jpeg_skip_scanlines). libjpeg
// reports errors by longjmp, so the functions that may jump hold no C++
// objects with destructors; JpegRegionDecoder owns the decompressor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tensorcom::pipeline {

struct JpegInfo {
  int width = 0;
  int height = 0;
  bool cmyk = false;  // CMYK or YCCK: decoded as CMYK, converted to RGB by us
};

// A decoded box: `width` x `height` pixels of four bytes, RGBX (X is
// padding) or, for CMYK files, CMYK in Adobe's inverted convention, starting
// at `pixels`, rows `stride` bytes apart (the box sits inside a wider,
// iMCU-aligned strip).
struct JpegRegion {
  std::uint8_t* pixels = nullptr;
  int x = 0;  // where pixels lies in the decoded image, in scaled pixels
  int y = 0;
  int width = 0;
  int height = 0;
  std::size_t stride = 0;
  bool cmyk = false;
};

// How far (in source pixels) beyond a box decoded at scale num/8 the
// decoder reads pixels: two at the decoding scale, what chroma upsampling
// looks at. A decode of a smaller JPEG cut from the image (a restart
// slice) gives the box's pixels exactly when the cut lies at least this
// far beyond the box, or at the image's edge.
[[nodiscard]] constexpr int decoder_context(int scale_num) { return (16 + scale_num - 1) / scale_num; }

class JpegRegionDecoder {
 public:
  struct State;  // the libjpeg decompressor and its error manager

  JpegRegionDecoder();
  ~JpegRegionDecoder();
  JpegRegionDecoder(const JpegRegionDecoder&) = delete;
  JpegRegionDecoder& operator=(const JpegRegionDecoder&) = delete;

  // Reads the header. Throws SampleError("undecodable", ...).
  [[nodiscard]] JpegInfo read_header(std::span<const std::byte> jpeg);
  // Decodes the box (x, y, w, h) of the source at scale num/8 (num 1 to 8)
  // into buffer; the box's coordinates are source pixels. Returns the
  // decoded box at the reduced scale, every pixel as a decode of the whole
  // image at that scale gives it. Throws SampleError.
  [[nodiscard]] JpegRegion decode(int x, int y, int w, int h, int scale_num,
                                  std::vector<std::uint8_t>& buffer);

 private:
  std::unique_ptr<State> state_;
  JpegInfo info_;
};

}  // namespace tensorcom::pipeline
