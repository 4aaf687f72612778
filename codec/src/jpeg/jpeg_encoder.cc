#include "jpeg/jpeg_encoder.h"

// jpeglib.h needs FILE and size_t declared first.
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "jpeg/libjpeg_errors.h"
#include "tensorcom/codec/error.h"

namespace tensorcom::jpeg {

namespace {

// The compressor and its output buffer, released in any case.
struct Compressor {
  jpeg_compress_struct cinfo{};
  LibjpegErrors err{};
  unsigned char* out = nullptr;
  unsigned long out_size = 0;

  Compressor() {
    use_libjpeg_errors(reinterpret_cast<j_common_ptr>(&cinfo), err);
    jpeg_create_compress(&cinfo);
  }
  ~Compressor() {
    jpeg_destroy_compress(&cinfo);
    std::free(out);
  }
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;
};

// May longjmp back to its own setjmp: holds only trivially destructible locals.
bool compress_protected(Compressor* c, const std::uint8_t* rgb, int width, int height, const JpegEncoding* e) {
  if (setjmp(c->err.jump)) return false;
  jpeg_compress_struct& cinfo = c->cinfo;
  jpeg_mem_dest(&cinfo, &c->out, &c->out_size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);  // YCbCr, 4:2:0, the integer DCT
  jpeg_set_quality(&cinfo, e->quality, TRUE);
  if (e->chroma_444) {
    cinfo.comp_info[0].h_samp_factor = 1;  // luma at the chroma's sampling: 4:4:4
    cinfo.comp_info[0].v_samp_factor = 1;
  }
  cinfo.optimize_coding = e->optimize_huffman ? TRUE : FALSE;
  if (e->restart_markers) cinfo.restart_interval = 1;
  jpeg_start_compress(&cinfo, TRUE);
  const std::size_t row_bytes = static_cast<std::size_t>(width) * 3;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(rgb + cinfo.next_scanline * row_bytes);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  return true;
}

}  // namespace

ByteBuffer encode_jpeg(const std::uint8_t* rgb, int width, int height, const JpegEncoding& encoding) {
  auto c = std::make_unique<Compressor>();
  if (!compress_protected(c.get(), rgb, width, height, &encoding)) {
    throw Error(std::string("JPEG encoding: ") + c->err.message);
  }
  const auto* out = reinterpret_cast<const std::byte*>(c->out);
  return ByteBuffer(out, out + c->out_size);
}

}  // namespace tensorcom::jpeg
