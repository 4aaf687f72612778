// Test helpers: JPEGs written with libjpeg itself, for the encodings OpenCV's
// imencode cannot ask for (CMYK, restart intervals, chosen chroma layouts),
// and decoded whole by it, as the reference for partial decoding.
#pragma once

// jpeglib.h needs FILE and size_t declared first.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <jpeglib.h>

namespace tensorcom::imaging::testing {

// Encodes width x height pixels of `components` channels in `space`:
// configure() adjusts the compressor after jpeg_set_defaults and
// jpeg_set_quality(quality); fill_row(y, row) writes row y.
inline std::vector<std::byte> libjpeg_encode(int width, int height, int components, J_COLOR_SPACE space, int quality,
                                             const std::function<void(jpeg_compress_struct&)>& configure,
                                             const std::function<void(int, unsigned char*)>& fill_row) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = components;
  cinfo.in_color_space = space;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  configure(cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<unsigned char> row(static_cast<std::size_t>(width) * components);
  while (cinfo.next_scanline < cinfo.image_height) {
    fill_row(static_cast<int>(cinfo.next_scanline), row.data());
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<std::byte> out(size);
  std::memcpy(out.data(), buffer, size);
  std::free(buffer);
  return out;
}

// The whole image decoded by libjpeg at scale num/8 as RGBX (the region
// decoder's settings: islow IDCT, fancy upsampling), row after row;
// *width and *height are the scaled size.
inline std::vector<std::uint8_t> libjpeg_decode_whole(const std::vector<std::byte>& jpeg, int num, int* width,
                                                      int* height) {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(jpeg.data()), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.scale_num = static_cast<unsigned>(num);
  cinfo.scale_denom = 8;
  cinfo.out_color_space = JCS_EXT_RGBX;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&cinfo);
  *width = static_cast<int>(cinfo.output_width);
  *height = static_cast<int>(cinfo.output_height);
  const std::size_t stride = static_cast<std::size_t>(cinfo.output_width) * 4;
  std::vector<std::uint8_t> pixels(stride * cinfo.output_height);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels.data() + cinfo.output_scanline * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return pixels;
}

// Returns jpeg with its last scan (SOS segment and entropy-coded data, up to
// the EOI marker) repeated so that it has `extra` more scans: a "scan bomb".
// libjpeg decodes the repeats (a bogus progression is only a warning), each
// one a pass over every coefficient. REQUIRES: jpeg ends with FF D9.
inline std::vector<std::byte> with_repeated_last_scan(const std::vector<std::byte>& jpeg, int extra) {
  std::size_t last_sos = 0;
  for (std::size_t i = 2; i + 1 < jpeg.size(); ++i) {
    if (jpeg[i] == std::byte{0xff} && jpeg[i + 1] == std::byte{0xda}) last_sos = i;
  }
  const std::size_t eoi = jpeg.size() - 2;
  std::vector<std::byte> out(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(eoi));
  for (int n = 0; n < extra; ++n) {
    out.insert(out.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(last_sos),
               jpeg.begin() + static_cast<std::ptrdiff_t>(eoi));
  }
  out.insert(out.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(eoi), jpeg.end());
  return out;
}

}  // namespace tensorcom::imaging::testing
