// Internal: Huffman decoding of a baseline JPEG scan whose restart
// intervals are known, in place of libjpeg-turbo's (docs/jpeg.md, "The
// interval decoder", has the design).
//
// libjpeg-turbo gives up its fast Huffman path for a whole image as soon
// as it has restart markers, and with a marker at every MCU (what
// `make-shards --restart-markers` writes, so that crops can skip) it also
// reads every MCU's marker through its marker reader and refills its bit
// buffer a byte at a time, checking each for 0xFF. Here each interval is
// found by offset (the slicer knows where it put them), copied once with
// its stuffed zero bytes taken out, and decoded from a 64-bit buffer that
// refills without branches, a table lookup giving the code's symbol, run
// and value at once for all but the longest codes; an MCU that a region
// decode skips costs nothing.
//
// It gives libjpeg-turbo's coefficients exactly, damaged data included, as
// libjpeg's reference (slow) Huffman path decodes it: bits past an
// interval's end read as zeros and leave the interval's later MCUs zero, an
// invalid code takes 17 bits and counts as symbol 0 (with libjpeg's
// warnings), runs past the block's end write its last coefficient, DC sums
// that overflow stop the decode as libjpeg's error. (libjpeg-turbo's fast
// path, for files without restart markers, departs from its slow path on
// one kind of invalid data: fill bytes before a stuffed zero.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

// jpeglib.h needs FILE and size_t declared first.
#include <cstdio>

#include <jpeglib.h>

#include "jpeg/byte_range.h"

namespace tensorcom::imaging {

class JpegIntervalDecoder {
 public:
  JpegIntervalDecoder();
  ~JpegIntervalDecoder();
  JpegIntervalDecoder(const JpegIntervalDecoder&) = delete;
  JpegIntervalDecoder& operator=(const JpegIntervalDecoder&) = delete;

  // Takes over the entropy decoding of cinfo's scan, just started by
  // jpeg_start_decompress: jpeg holds the file cinfo reads, `intervals`
  // its scan's restart intervals in order, or, for a scan without restart
  // markers, one range from the scan's first byte on. Both must outlive the
  // decode. Returns false, leaving libjpeg's own decoder in place, unless
  // the scan is a single sequential Huffman scan of every component with
  // exactly that many intervals.
  //
  // With `unstuffed`, `jpeg` is not the file but its intervals' bytes with
  // the stuffing taken out, kUnstuffedPadding zero bytes after each
  // (entropy_bytes.h; slice_restart_intervals writes them so).
  bool install(jpeg_decompress_struct* cinfo, std::span<const std::byte> jpeg, std::span<const ByteRange> intervals,
               bool unstuffed = false);

  // One Huffman table as the decoder uses it.
  struct Table;

 private:
  struct Hook;
  static boolean decode_mcu(j_decompress_ptr cinfo, JBLOCKROW* blocks);
  void start_interval(j_decompress_ptr cinfo, std::size_t interval);
  void decode_blocks(j_decompress_ptr cinfo, JBLOCKROW* blocks);

  std::vector<Table> tables_;  // dc tables 0..3, then ac tables 0..3
  std::unique_ptr<Hook> hook_;
  const std::uint8_t* data_ = nullptr;
  bool unstuffed_input_ = false;  // data_ holds intervals already unstuffed
  std::span<const ByteRange> intervals_;
  std::vector<std::uint8_t> unstuffed_;   // the current interval, stuffing removed, zeros after
  const std::uint8_t* stream_ = nullptr;  // the current interval's unstuffed bytes
  const Table* dc_[10] = {};              // by block of the MCU
  const Table* ac_[10] = {};
  int component_of_block_[10] = {};
  int blocks_in_mcu_ = 0;
  int mcus_per_interval_ = 0;
  // Where the MCU libjpeg asks for next lies (it asks for them in order).
  std::size_t next_interval_ = 0;
  int next_in_interval_ = 0;
  // The interval being decoded (kNoInterval before the first).
  static constexpr std::size_t kNoInterval = SIZE_MAX;
  std::size_t interval_ = kNoInterval;
  int last_dc_[4] = {};
  // Once an interval's bits are used up, libjpeg leaves its remaining MCUs
  // zero.
  bool used_up_ = false;
  // The bit reader over stream_.
  std::uint64_t bits_ = 0;  // the next bits, from the top
  int bit_count_ = 0;       // how many of them are valid
  std::size_t next_ = 0;    // byte offset of the next load
  std::size_t size_ = 0;    // data bytes at stream_; zeros follow
  JBLOCK discarded_{};      // where skipped MCUs go when intervals hold several
};

}  // namespace tensorcom::imaging
