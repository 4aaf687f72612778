#include "tensorcom/imaging/restart_markers.h"

// jpeglib.h needs FILE and size_t declared first.
#include <cstddef>
#include <cstdio>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "jpeg/libjpeg_errors.h"
#include "tensorcom/codec/error.h"

namespace tensorcom::imaging {

namespace {

// Both libjpeg objects and the output buffer, released in any case.
struct Transcoder {
  jpeg_decompress_struct src{};
  jpeg_compress_struct dst{};
  jpeg::LibjpegErrors err{};
  unsigned char* out = nullptr;
  unsigned long out_size = 0;

  Transcoder() {
    jpeg::use_libjpeg_errors(reinterpret_cast<j_common_ptr>(&src), err);
    dst.err = &err.pub;
    jpeg_create_decompress(&src);
    jpeg_create_compress(&dst);
    jpeg::limit_scans(&src, err);
  }
  ~Transcoder() {
    jpeg_destroy_compress(&dst);
    jpeg_destroy_decompress(&src);
    std::free(out);
  }
  Transcoder(const Transcoder&) = delete;
  Transcoder& operator=(const Transcoder&) = delete;
};

// The segments to carry over: all but the JFIF and Adobe ones that the
// compressor writes itself (jpegtran's rule).
bool written_by_compressor(const jpeg_compress_struct& dst, const jpeg_marker_struct& m) {
  auto starts_with = [&](const char* tag, unsigned n) {
    return m.data_length >= n && std::memcmp(m.data, tag, n) == 0;
  };
  return (dst.write_JFIF_header && m.marker == JPEG_APP0 && starts_with("JFIF", 5)) ||
         (dst.write_Adobe_marker && m.marker == JPEG_APP0 + 14 && starts_with("Adobe", 5));
}

// May longjmp back to its own setjmp: holds only trivially destructible locals.
bool transcode_protected(Transcoder* t, const unsigned char* data, std::size_t size, std::uint64_t max_pixels) {
  if (setjmp(t->err.jump)) return false;
  jpeg_mem_src(&t->src, data, static_cast<unsigned long>(size));
  jpeg_save_markers(&t->src, JPEG_COM, 0xFFFF);
  for (int m = 0; m < 16; ++m) jpeg_save_markers(&t->src, JPEG_APP0 + m, 0xFFFF);
  jpeg_read_header(&t->src, TRUE);
  // Checked by division: a declared 65535 x 65535 must not pass by overflow.
  if (t->src.image_height > 0 && t->src.image_width > max_pixels / t->src.image_height) {
    std::snprintf(t->err.message, sizeof t->err.message, "%u x %u pixels, over the limit of %llu", t->src.image_width,
                  t->src.image_height, static_cast<unsigned long long>(max_pixels));
    return false;
  }
  jvirt_barray_ptr* coefficients = jpeg_read_coefficients(&t->src);
  jpeg_mem_dest(&t->dst, &t->out, &t->out_size);
  jpeg_copy_critical_parameters(&t->src, &t->dst);
  t->dst.restart_interval = 1;
  t->dst.optimize_coding = TRUE;
  jpeg_write_coefficients(&t->dst, coefficients);
  for (jpeg_saved_marker_ptr m = t->src.marker_list; m; m = m->next) {
    if (!written_by_compressor(t->dst, *m)) jpeg_write_marker(&t->dst, m->marker, m->data, m->data_length);
  }
  jpeg_finish_compress(&t->dst);
  jpeg_finish_decompress(&t->src);
  return true;
}

}  // namespace

ByteBuffer with_restart_markers(std::span<const std::byte> jpeg, std::uint64_t max_pixels) {
  auto t = std::make_unique<Transcoder>();
  if (!transcode_protected(t.get(), reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(), max_pixels)) {
    const std::size_t unread = t->src.src ? t->src.src->bytes_in_buffer : jpeg.size();
    throw FormatError(std::string("JPEG: ") + t->err.message, jpeg.size() - unread);
  }
  const auto* out = reinterpret_cast<const std::byte*>(t->out);
  return ByteBuffer(out, out + t->out_size);
}

std::optional<std::string> add_restart_markers(ByteBuffer& image) {
  try {
    image = with_restart_markers(image);
    return std::nullopt;
  } catch (const FormatError& e) {
    return e.what();
  }
}

}  // namespace tensorcom::imaging
