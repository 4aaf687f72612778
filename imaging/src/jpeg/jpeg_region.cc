#include "jpeg/jpeg_region.h"

// jpeglib.h needs FILE and size_t declared first.
#include <cstdio>
#include <csetjmp>

#include <algorithm>
#include <climits>
#include <cstdint>

#include <jerror.h>

#include "tensorcom/imaging/problem.h"
#include "jpeg/jpeg_interval_decoder.h"
#include "jpeg/libjpeg_errors.h"

namespace tensorcom::imaging {

struct JpegRegionDecoder::State {
  jpeg_decompress_struct cinfo{};
  jpeg::LibjpegErrors err{};
  JpegIntervalDecoder interval_decoder;  // our Huffman decoding, installed per decode
};

namespace {

// Pixels (at the decoding scale) beyond a box that libjpeg-turbo's chroma
// upsampling reads: one chroma pixel, two pixels wide when chroma is
// subsampled twice (the most its fancy upsampling handles; larger factors
// are replicated, reading nothing beside).
constexpr JDIMENSION kStripContext = 2;

// The functions below may longjmp back to their own setjmp: they hold only
// trivially destructible locals. Each returns false if libjpeg failed.

bool read_header_protected(JpegRegionDecoder::State* s, const unsigned char* data, unsigned long size) {
  if (setjmp(s->err.jump)) return false;
  jpeg_mem_src(&s->cinfo, data, size);
  jpeg_read_header(&s->cinfo, TRUE);
  return true;
}

bool calc_dimensions_protected(JpegRegionDecoder::State* s) {
  if (setjmp(s->err.jump)) return false;
  jpeg_calc_output_dimensions(&s->cinfo);
  return true;
}

// Starts decompressing the strip (x, width are widened by libjpeg to whole
// iMCUs) and skips to first_row; the interval decoder takes over the
// Huffman decoding if given and it can. *installed says whether it did.
// With `unstuffed`, `jpeg` holds the intervals unstuffed, and a decode
// without the interval decoder would read no data: it is not started.
bool start_strip_protected(JpegRegionDecoder::State* s, JDIMENSION* x, JDIMENSION* width, JDIMENSION first_row,
                           JpegIntervalDecoder* decoder, std::span<const std::byte> jpeg,
                           std::span<const ByteRange> intervals, bool unstuffed, bool* installed) {
  if (setjmp(s->err.jump)) return false;
  jpeg_start_decompress(&s->cinfo);
  *installed = decoder && decoder->install(&s->cinfo, jpeg, intervals, unstuffed);
  if (unstuffed && !*installed) return true;
  jpeg_crop_scanline(&s->cinfo, x, width);
  if (first_row > 0) jpeg_skip_scanlines(&s->cinfo, first_row);
  return true;
}

// Asks for up to 16 rows a call: libjpeg's per-call work (its main and
// post-processing controllers) is a few percent of a decode a row at a time.
bool read_rows_protected(JpegRegionDecoder::State* s, unsigned char* buffer, std::size_t stride, JDIMENSION rows) {
  if (setjmp(s->err.jump)) return false;
  constexpr JDIMENSION kRowsPerCall = 16;
  JSAMPROW pointers[kRowsPerCall];
  for (JDIMENSION done = 0; done < rows;) {
    const JDIMENSION ask = std::min(kRowsPerCall, rows - done);
    for (JDIMENSION i = 0; i < ask; ++i) pointers[i] = buffer + (done + i) * stride;
    done += jpeg_read_scanlines(&s->cinfo, pointers, ask);
  }
  return true;
}

// libjpeg-turbo's SIMD colour conversion writes a row that starts 32-byte
// aligned (16 on CPUs without AVX2) with non-temporal stores, which go
// around the cache, so the resampler reading the rows next fetched each one
// back from memory: a server on full-resolution photos lost a quarter of its
// rate whenever its row buffer happened to be aligned. Rows here start
// kRowPhase bytes past a cache line and are whole cache lines apart: none is
// ever 16-byte aligned, and their stores stay in the cache.
constexpr std::size_t kCacheLine = 64;
constexpr std::size_t kRowPhase = 8;

std::size_t row_stride(JDIMENSION width) {
  return (static_cast<std::size_t>(width) * 4 + kCacheLine - 1) / kCacheLine * kCacheLine;
}

// Room for `bytes` of rows in buffer, from the first address kRowPhase past
// a cache line.
std::uint8_t* rows_in(std::vector<std::uint8_t>& buffer, std::size_t bytes) {
  buffer.resize(bytes + kCacheLine);
  const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
  return buffer.data() + ((kRowPhase - address) & (kCacheLine - 1));
}

// Adobe CMYK JPEGs store inverted ink values: R = C * K / 255 on the stored
// values. Converts rows of 4-byte pixels in place to RGBX.
void cmyk_to_rgbx(std::uint8_t* pixels, std::size_t stride, int width, int rows) {
  for (int r = 0; r < rows; ++r) {
    std::uint8_t* px = pixels + static_cast<std::size_t>(r) * stride;
    for (int c = 0; c < width; ++c, px += 4) {
      const unsigned k = px[3];
      px[0] = static_cast<std::uint8_t>(px[0] * k / 255);
      px[1] = static_cast<std::uint8_t>(px[1] * k / 255);
      px[2] = static_cast<std::uint8_t>(px[2] * k / 255);
    }
  }
}

// Region decoding stops at the box's last row, so a file cut short below it
// would go unnoticed. Every complete JPEG ends its scans with an EOI marker
// (FF D9), which cannot occur inside entropy-coded data (there FF is followed
// by 00 or a restart marker), so its absence after the first scan proves the
// file truncated. Usually the marker is the last two bytes: the search ends at
// once.
bool has_end_of_image(const unsigned char* scan, std::size_t size) {
  for (std::size_t i = size; i >= 2; --i) {
    if (scan[i - 1] == 0xD9 && scan[i - 2] == 0xFF) return true;
  }
  return false;
}

}  // namespace

JpegRegionDecoder::JpegRegionDecoder() : state_(std::make_unique<State>()) {
  jpeg::use_libjpeg_errors(reinterpret_cast<j_common_ptr>(&state_->cinfo), state_->err);
  jpeg_create_decompress(&state_->cinfo);
  jpeg::limit_scans(&state_->cinfo, state_->err);
}

JpegRegionDecoder::~JpegRegionDecoder() { jpeg_destroy_decompress(&state_->cinfo); }

JpegInfo JpegRegionDecoder::read_header(std::span<const std::byte> jpeg) {
  jpeg_abort_decompress(&state_->cinfo);  // forget the previous image
  state_->err.too_many_scans = false;
  const auto* data = reinterpret_cast<const unsigned char*>(jpeg.data());
  if (!read_header_protected(state_.get(), data, static_cast<unsigned long>(jpeg.size()))) {
    throw ImageError(Problem::kUndecodable, std::string("JPEG header: ") + state_->err.message);
  }
  jpeg_ = jpeg;
  const jpeg_decompress_struct& c = state_->cinfo;
  std::size_t scan_bytes = c.src->bytes_in_buffer;  // what follows the first scan's header
  if (!has_end_of_image(data + (jpeg.size() - scan_bytes), scan_bytes)) {
    throw ImageError(Problem::kTruncated, "JPEG: no end-of-image marker after the scan data: the file was cut short");
  }
  whole_scan_ = jpeg.size() <= UINT32_MAX ? ByteRange{static_cast<std::uint32_t>(jpeg.size() - scan_bytes),
                                                      static_cast<std::uint32_t>(jpeg.size())}
                                          : ByteRange{};
  info_.width = static_cast<int>(c.image_width);
  info_.height = static_cast<int>(c.image_height);
  info_.cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
  return info_;
}

// What plan_strip settles: the box in scaled pixels, [x0, x1) x [y0, y1),
// and the columns decoded around it.
struct JpegRegionDecoder::Strip {
  JDIMENSION x0, x1, y0, y1;
  JDIMENSION strip_x, strip_width;
  std::size_t stride;  // of a row of the whole scaled width, in whole cache lines (row_stride)

  [[nodiscard]] JpegRegion region(std::uint8_t* buffer) const {
    return JpegRegion{buffer ? buffer + static_cast<std::size_t>(x0 - strip_x) * 4 : nullptr,
                      static_cast<int>(x0),
                      static_cast<int>(y0),
                      static_cast<int>(x1 - x0),
                      static_cast<int>(y1 - y0),
                      stride};
  }
};

JpegRegionDecoder::Strip JpegRegionDecoder::plan_strip(int x, int y, int w, int h, int scale_num) {
  jpeg_decompress_struct& c = state_->cinfo;
  c.scale_num = static_cast<unsigned>(scale_num);
  c.scale_denom = 8;
  // Four bytes a pixel either way: the resizers read aligned pixels, and
  // libjpeg writes the padding byte for free while converting colour.
  c.out_color_space = info_.cmyk ? JCS_CMYK : JCS_EXT_RGBX;
  c.dct_method = JDCT_ISLOW;
  // Fancy upsampling stays on: without it libjpeg-turbo picks its merged
  // upsampler, which jpeg_crop_scanline/jpeg_skip_scanlines corrupt memory
  // with in the 2.1 series (upstream issues 574 and 915; crashes seen here).
  c.do_fancy_upsampling = TRUE;
  if (!calc_dimensions_protected(state_.get())) {
    throw ImageError(Problem::kUndecodable, std::string("JPEG: ") + state_->err.message);
  }
  // The box in scaled pixels, rounded outwards and kept inside the image.
  auto scaled = [&](int v, bool up) {
    long long num = static_cast<long long>(v) * scale_num;
    return static_cast<JDIMENSION>(up ? (num + 7) / 8 : num / 8);
  };
  Strip s{};
  s.x0 = scaled(x, false);
  s.y0 = scaled(y, false);
  s.x1 = std::max(std::min(scaled(x + w, true), c.output_width), s.x0 + 1);
  s.y1 = std::max(std::min(scaled(y + h, true), c.output_height), s.y0 + 1);
  // libjpeg-turbo upsamples chroma in a cropped strip as if the strip's
  // edges were the image's: the first or last columns of a box at an edge
  // of the strip would differ from a whole-image decode (one chroma pixel
  // is two pixels wide). Two more columns each side keep the box exact.
  const JDIMENSION strip_begin = s.x0 > kStripContext ? s.x0 - kStripContext : 0;
  const JDIMENSION strip_end = std::min(s.x1 + kStripContext, c.output_width);
  s.strip_x = strip_begin;  // widened by libjpeg to whole iMCUs
  s.strip_width = strip_end - strip_begin;
  s.stride = row_stride(c.output_width);
  return s;
}

long JpegRegionDecoder::warnings() const noexcept { return state_->err.pub.num_warnings; }

void JpegRegionDecoder::throw_decode_error() const {
  const Problem problem = state_->err.too_many_scans                  ? Problem::kTooManyScans
                          : state_->err.pub.msg_code == JWRN_JPEG_EOF ? Problem::kTruncated
                                                                      : Problem::kUndecodable;
  throw ImageError(problem, std::string("JPEG: ") + state_->err.message);
}

void JpegRegionDecoder::start_strip(Strip& s, std::span<const ByteRange> intervals,
                                    std::span<const std::byte> unstuffed) {
  // Without intervals, a scan without restart markers is one (install
  // refuses it for a file that has them).
  if (intervals.empty() && !whole_scans_by_libjpeg_ && whole_scan_.end > whole_scan_.begin) {
    intervals = std::span<const ByteRange>(&whole_scan_, 1);
  }
  const bool given_unstuffed = !unstuffed.empty();
  bool installed = false;
  if (!start_strip_protected(state_.get(), &s.strip_x, &s.strip_width, s.y0,
                             intervals.empty() ? nullptr : &state_->interval_decoder,
                             given_unstuffed ? unstuffed : jpeg_, intervals, given_unstuffed, &installed)) {
    throw_decode_error();
  }
  if (given_unstuffed && !installed) {
    // The slicer checked what the interval decoder needs; a file that gets
    // here has a scan it cannot read, whose data the slice does not hold.
    throw ImageError(Problem::kUndecodable, "JPEG: a scan with restart markers the interval decoder cannot read");
  }
  if (installed) ++interval_decodes_;
}

JpegRegion JpegRegionDecoder::decode(int x, int y, int w, int h, int scale_num, std::vector<std::uint8_t>& buffer,
                                     std::span<const ByteRange> intervals, std::span<const std::byte> unstuffed) {
  Strip s = plan_strip(x, y, w, h, scale_num);
  std::uint8_t* rows = rows_in(buffer, s.stride * (s.y1 - s.y0));
  start_strip(s, intervals, unstuffed);
  if (!read_rows_protected(state_.get(), rows, s.stride, s.y1 - s.y0)) throw_decode_error();
  // The rows below the box are never decoded.
  jpeg_abort_decompress(&state_->cinfo);
  JpegRegion region = s.region(rows);
  if (info_.cmyk) cmyk_to_rgbx(region.pixels, region.stride, region.width, region.height);
  return region;
}

JpegRegion JpegRegionDecoder::decode_rows(int x, int y, int w, int h, int scale_num, std::vector<std::uint8_t>& buffer,
                                          RowSink& sink, std::span<const ByteRange> intervals,
                                          std::span<const std::byte> unstuffed) {
  Strip s = plan_strip(x, y, w, h, scale_num);
  std::uint8_t* rows = rows_in(buffer, s.stride * kStreamRows);
  start_strip(s, intervals, unstuffed);
  const JpegRegion whole = s.region(rows);
  for (JDIMENSION row = s.y0; row < s.y1;) {
    const JDIMENSION count = std::min<JDIMENSION>(kStreamRows, s.y1 - row);
    if (!read_rows_protected(state_.get(), rows, s.stride, count)) throw_decode_error();
    if (info_.cmyk) cmyk_to_rgbx(whole.pixels, whole.stride, whole.width, static_cast<int>(count));
    sink.take_rows(whole.pixels, whole.stride, static_cast<int>(row), static_cast<int>(count));
    row += count;
  }
  jpeg_abort_decompress(&state_->cinfo);
  return s.region(nullptr);
}

}  // namespace tensorcom::imaging
