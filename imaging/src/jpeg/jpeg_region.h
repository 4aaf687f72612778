// Internal: decoding a box of a JPEG at a DCT scale with libjpeg-turbo's
// partial-decoding calls (jpeg_crop_scanline, jpeg_skip_scanlines). libjpeg
// reports errors by longjmp, so the functions that may jump hold no C++
// objects with destructors; JpegRegionDecoder owns the decompressor.
// docs/jpeg.md, "Region decoding", describes the design.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "jpeg/byte_range.h"

namespace tensorcom::imaging {

struct JpegInfo {
  int width = 0;
  int height = 0;
  bool cmyk = false;  // CMYK or YCCK: decoded as CMYK, converted to RGB by us
};

// A decoded box: `width` x `height` pixels of four bytes, RGBX (X is
// padding; CMYK files are converted), starting at `pixels`, rows `stride`
// bytes apart (the box sits inside a wider, iMCU-aligned strip).
struct JpegRegion {
  std::uint8_t* pixels = nullptr;
  int x = 0;  // where pixels lies in the decoded image, in scaled pixels
  int y = 0;
  int width = 0;
  int height = 0;
  std::size_t stride = 0;
};

// Takes a box's rows as they are decoded: `count` rows of RGBX, the box's
// first column at `pixels`, rows `stride` bytes apart; the first is row
// `first_row` of the image decoded at its scale. Must not throw.
class RowSink {
 public:
  virtual void take_rows(const std::uint8_t* pixels, std::size_t stride, int first_row, int count) noexcept = 0;

 protected:
  ~RowSink() = default;
};

// How far (in source pixels) beyond a box decoded at scale num/8 the
// decoder reads pixels: two at the decoding scale, what chroma upsampling
// looks at. A decode of a smaller JPEG cut from the image (a restart
// slice) gives the box's pixels exactly when the cut lies at least this
// far beyond the box, or at the image's edge.
[[nodiscard]] constexpr int decoder_context(int scale_num) { return (16 + scale_num - 1) / scale_num; }

class JpegRegionDecoder {
 public:
  struct State;  // the libjpeg decompressor, its error manager, the interval decoder

  JpegRegionDecoder();
  ~JpegRegionDecoder();
  JpegRegionDecoder(const JpegRegionDecoder&) = delete;
  JpegRegionDecoder& operator=(const JpegRegionDecoder&) = delete;

  // Reads the header. Throws ImageError (problem.h).
  [[nodiscard]] JpegInfo read_header(std::span<const std::byte> jpeg);
  // Decodes the box (x, y, w, h) of the source at scale num/8 (num 1 to 8)
  // into buffer; the box's coordinates are source pixels. Returns the
  // decoded box at the reduced scale, every pixel as a decode of the whole
  // image at that scale gives it. Throws ImageError.
  //
  // `intervals`, when given, are the restart intervals of the JPEG whose
  // header was read (a restart slice's): a JpegIntervalDecoder then does
  // the Huffman decoding, libjpeg the rest. With `unstuffed`, they lie
  // there instead, as slice_restart_intervals' `unstuffed` gives them (the
  // JPEG read is that call's headers-only slice); throws ImageError if
  // the interval decoder cannot take them.
  [[nodiscard]] JpegRegion decode(int x, int y, int w, int h, int scale_num, std::vector<std::uint8_t>& buffer,
                                  std::span<const ByteRange> intervals = {}, std::span<const std::byte> unstuffed = {});
  // The same box, handed to sink kStreamRows rows at a time as they are
  // decoded, through a buffer of that many rows: the next step reads them
  // while they are in cache, and the box is never in memory whole. Returns
  // the box as decode() does, without pixels (they are gone).
  static constexpr int kStreamRows = 16;
  [[nodiscard]] JpegRegion decode_rows(int x, int y, int w, int h, int scale_num, std::vector<std::uint8_t>& buffer,
                                       RowSink& sink, std::span<const ByteRange> intervals = {},
                                       std::span<const std::byte> unstuffed = {});

  // How many decodes so far had their Huffman decoding done by the
  // JpegIntervalDecoder: those given intervals, and those of files without
  // restart markers (one interval, the whole scan), unless turned off here
  // (for tests and benchmarks that compare it with libjpeg's).
  [[nodiscard]] std::uint64_t interval_decodes() const noexcept { return interval_decodes_; }
  void decode_whole_scans_with_libjpeg(bool yes) noexcept { whole_scans_by_libjpeg_ = yes; }
  // The warnings (damaged data that decoding went past) since the last
  // read_header().
  [[nodiscard]] long warnings() const noexcept;

 private:
  struct Strip;
  [[nodiscard]] Strip plan_strip(int x, int y, int w, int h, int scale_num);
  void start_strip(Strip& strip, std::span<const ByteRange> intervals, std::span<const std::byte> unstuffed);
  [[noreturn]] void throw_decode_error() const;

  std::unique_ptr<State> state_;
  std::span<const std::byte> jpeg_;  // the file whose header was read last
  ByteRange whole_scan_;             // its first scan's data, to the end of the file
  bool whole_scans_by_libjpeg_ = false;
  std::uint64_t interval_decodes_ = 0;
  JpegInfo info_;
};

}  // namespace tensorcom::imaging
