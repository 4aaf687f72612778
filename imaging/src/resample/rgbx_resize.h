// Internal: the JPEG path's last step, from the decoded RGBX crop to the
// batch's RGB pixels: bilinear resize, mirror and padding removal in one pass
// over the output, with no full-size intermediate image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tensorcom::imaging {

// Samples as OpenCV's INTER_LINEAR does (pixel centres aligned, edges
// clamped, 11-bit fixed-point weights), so results match cv::resize to
// within one grey level. Keeps its tables and row buffers between calls:
// one per worker thread.
class RgbxResizer {
 public:
  // Resizes width x height RGBX pixels (rows `stride` bytes apart) to
  // out_width x out_height, each row mirrored if flip, and writes RGB rows
  // 3 * out_width bytes apart to out. Uses SSSE3 where the CPU has it.
  // Requires: every dimension >= 1.
  void resize_to_rgb(const std::uint8_t* rgbx, int width, int height, std::size_t stride, int out_width, int out_height,
                     bool flip, std::uint8_t* out);

  // The same with the portable loops only, for tests and CPUs without SSSE3.
  void resize_to_rgb_portable(const std::uint8_t* rgbx, int width, int height, std::size_t stride, int out_width,
                              int out_height, bool flip, std::uint8_t* out);

 private:
  struct Tap {
    int offset;           // of the left (upper) source pixel (row)
    std::int16_t weight;  // of the right (lower) one, out of kWeightOne; the other gets the rest
  };
  // Where each of `out` samples across `in` pixels takes its two taps.
  static void taps(int in, int out, bool mirror, std::vector<Tap>& result);
  void run(const std::uint8_t* rgbx, int width, int height, std::size_t stride, int out_width, int out_height,
           bool flip, std::uint8_t* out, bool vector);

  std::vector<Tap> columns_, rows_;
  std::vector<std::int32_t> column_pairs_;   // the vector path's weights: 2 x 16 bits, 4 times per column
  std::vector<std::int16_t> upper_, lower_;  // source rows resampled across, 4 channels, scaled by 2^7
  std::vector<std::uint8_t> rgbx_row_;       // one output row before the padding byte is dropped
};

}  // namespace tensorcom::imaging
