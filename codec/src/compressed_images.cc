#include "tensorcom/codec/compressed_images.h"

// jpeglib.h (through libjpeg_errors.h) needs FILE and size_t declared first.
#include <array>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include <zstd.h>

#include "jpeg/jpeg_encoder.h"
#include "jpeg/libjpeg_errors.h"
#include "parallel_chunks.h"
#include "tensorcom/codec/error.h"

namespace tensorcom {

namespace {

constexpr std::int64_t kMaxSide = 65535;  // JPEG's largest dimension

// How images sit in their tensor: (n, h, w, 3) or (n, 3, h, w).
struct ImageGeometry {
  std::int64_t n = 0, h = 0, w = 0;
  bool planar = false;
  bool zstd = false;  // the streams' codec: zstd, else JPEG
  [[nodiscard]] std::size_t image_bytes() const { return static_cast<std::size_t>(h * w * 3); }
};

[[nodiscard]] std::string shape_text(const Shape& shape) { return format_shape(shape); }

ImageGeometry images_geometry(const Tensor& images) {
  const Shape& s = images.shape();
  if (images.dtype() != DType::kUInt8 || s.size() != 4 || (s[3] != 3 && s[1] != 3)) {
    throw ArgumentError("compressed images: expected uint8 (n, h, w, 3) or (n, 3, h, w), not " +
                        std::string(dtype_name(images.dtype())) + " " + shape_text(s));
  }
  ImageGeometry g;
  g.planar = s[3] != 3;
  g.n = s[0];
  g.h = g.planar ? s[2] : s[1];
  g.w = g.planar ? s[3] : s[2];
  if (g.h < 1 || g.h > kMaxSide || g.w < 1 || g.w > kMaxSide) {
    throw ArgumentError("compressed images: sides must be 1 to 65535 pixels, not " + shape_text(s));
  }
  return g;
}

// Image i as interleaved RGB rows: in place for BHWC, gathered into scratch for BCHW.
const std::uint8_t* interleaved(const Tensor& images, const ImageGeometry& g, std::int64_t i,
                                std::vector<std::uint8_t>& scratch) {
  const auto* base = reinterpret_cast<const std::uint8_t*>(images.data()) + i * g.image_bytes();
  if (!g.planar) return base;
  const std::size_t plane = static_cast<std::size_t>(g.h * g.w);
  scratch.resize(plane * 3);
  for (std::size_t p = 0; p < plane; ++p) {
    for (std::size_t c = 0; c < 3; ++c) scratch[p * 3 + c] = base[c * plane + p];
  }
  return scratch.data();
}

// --- the lossless codec: zstd of left-predicted bytes ---------------------------------

// What a pixel's byte is predicted from: the same channel of the pixel to
// its left, or above for the first column (0 for the first pixel). Photos'
// neighbours are close, so the differences are small numbers zstd packs.
void predict_left(const std::uint8_t* rgb, std::uint8_t* out, std::size_t h, std::size_t w) {
  const std::size_t row = w * 3;
  for (std::size_t y = 0; y < h; ++y) {
    const std::uint8_t* p = rgb + y * row;
    std::uint8_t* d = out + y * row;
    const std::uint8_t* above = y > 0 ? p - row : nullptr;
    for (std::size_t c = 0; c < 3; ++c) d[c] = static_cast<std::uint8_t>(p[c] - (above ? above[c] : 0));
    for (std::size_t i = 3; i < row; ++i) d[i] = static_cast<std::uint8_t>(p[i] - p[i - 3]);
  }
}

// predict_left undone, in place.
void unpredict_left(std::uint8_t* rgb, std::size_t h, std::size_t w) {
  const std::size_t row = w * 3;
  for (std::size_t y = 0; y < h; ++y) {
    std::uint8_t* p = rgb + y * row;
    const std::uint8_t* above = y > 0 ? p - row : nullptr;
    for (std::size_t c = 0; c < 3; ++c) p[c] = static_cast<std::uint8_t>(p[c] + (above ? above[c] : 0));
    for (std::size_t i = 3; i < row; ++i) p[i] = static_cast<std::uint8_t>(p[i] + p[i - 3]);
  }
}

ByteBuffer encode_zstd(const std::uint8_t* rgb, const ImageGeometry& g, int level, std::vector<std::uint8_t>& scratch) {
  const std::size_t bytes = g.image_bytes();
  scratch.resize(bytes);
  predict_left(rgb, scratch.data(), static_cast<std::size_t>(g.h), static_cast<std::size_t>(g.w));
  ByteBuffer out(ZSTD_compressBound(bytes));
  const std::size_t size = ZSTD_compress(out.data(), out.size(), scratch.data(), bytes, level);
  if (ZSTD_isError(size)) throw Error(std::string("zstd compression: ") + ZSTD_getErrorName(size));
  out.resize(size);
  return out;
}

// Decodes one zstd stream into image_bytes at dst; the reason it cannot otherwise.
std::optional<std::string> decode_zstd(const std::uint8_t* data, std::size_t size, const ImageGeometry& g,
                                       std::uint8_t* dst) {
  const std::size_t bytes = g.image_bytes();
  const unsigned long long declared = ZSTD_getFrameContentSize(data, size);
  if (declared == ZSTD_CONTENTSIZE_ERROR) return "not a zstd frame";
  if (declared != bytes) {
    return declared == ZSTD_CONTENTSIZE_UNKNOWN ? "a zstd frame of unstated size"
                                                : "a zstd frame of " + std::to_string(declared) +
                                                      " bytes where the batch declares " + std::to_string(bytes);
  }
  const std::size_t got = ZSTD_decompress(dst, bytes, data, size);
  if (ZSTD_isError(got)) return std::string("zstd: ") + ZSTD_getErrorName(got);
  if (got != bytes) return "a zstd frame of " + std::to_string(got) + " bytes";
  unpredict_left(dst, static_cast<std::size_t>(g.h), static_cast<std::size_t>(g.w));
  return std::nullopt;
}

void scatter_image(const std::uint8_t* hwc, const ImageGeometry& g, std::uint8_t* chw) {
  const std::size_t plane = static_cast<std::size_t>(g.h * g.w);
  for (std::size_t p = 0; p < plane; ++p) {
    for (std::size_t c = 0; c < 3; ++c) chw[c * plane + p] = hwc[p * 3 + c];
  }
}

// --- decoding -------------------------------------------------------------------------

// A decompressor reused for a chunk of images, released in any case.
struct Decompressor {
  jpeg_decompress_struct cinfo{};
  jpeg::LibjpegErrors err{};

  Decompressor() {
    jpeg::use_libjpeg_errors(reinterpret_cast<j_common_ptr>(&cinfo), err);
    jpeg_create_decompress(&cinfo);
    jpeg::limit_scans(&cinfo, err);
  }
  ~Decompressor() { jpeg_destroy_decompress(&cinfo); }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
};

// Where one image goes: rows of w * 3 bytes at `hwc`, or, for planar
// output, each row through `row` (w * 3 bytes) into three planes at `chw`.
struct DecodeTarget {
  const ImageGeometry* g;
  std::uint8_t* hwc;
  std::uint8_t* chw;
  std::uint8_t* row;
};

void scatter_row(const DecodeTarget& t, std::size_t y) {
  const std::size_t w = static_cast<std::size_t>(t.g->w), plane = static_cast<std::size_t>(t.g->h) * w;
  for (std::size_t x = 0; x < w; ++x) {
    for (std::size_t c = 0; c < 3; ++c) t.chw[c * plane + y * w + x] = t.row[x * 3 + c];
  }
}

// May longjmp back to its own setjmp: holds only trivially destructible
// locals. False with the reason in `why` (or libjpeg's in d->err.message).
bool decode_protected(Decompressor* d, const std::uint8_t* data, std::size_t size, const DecodeTarget* t,
                      char (*why)[160]) {
  jpeg_decompress_struct& cinfo = d->cinfo;
  if (setjmp(d->err.jump)) {
    jpeg_abort_decompress(&cinfo);
    return false;
  }
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.image_width != static_cast<JDIMENSION>(t->g->w) || cinfo.image_height != static_cast<JDIMENSION>(t->g->h) ||
      cinfo.num_components != 3) {
    std::snprintf(*why, sizeof *why, "a %ux%u JPEG of %d components where the batch declares %lldx%lld RGB",
                  cinfo.image_width, cinfo.image_height, cinfo.num_components, static_cast<long long>(t->g->w),
                  static_cast<long long>(t->g->h));
    jpeg_abort_decompress(&cinfo);
    return false;
  }
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  const std::size_t row_bytes = static_cast<std::size_t>(t->g->w) * 3;
  while (cinfo.output_scanline < cinfo.output_height) {
    const std::size_t y = cinfo.output_scanline;
    JSAMPROW row = t->chw != nullptr ? t->row : t->hwc + y * row_bytes;
    jpeg_read_scanlines(&cinfo, &row, 1);
    if (t->chw != nullptr) scatter_row(*t, y);
  }
  jpeg_finish_decompress(&cinfo);
  return true;
}

[[noreturn]] void malformed(const std::string& what, std::uint64_t offset) {
  throw FormatError(FormatErrorKind::kCompressedImages, "compressed images: " + what, offset);
}

// The declared geometry, checked against the streams and offsets tensors.
ImageGeometry declared_geometry(const Tensor& streams, const Tensor& offsets, const Tensor& shape,
                                const DecompressLimits& limits) {
  if (streams.dtype() != DType::kUInt8 || streams.ndim() != 1) malformed("the streams are not a uint8 vector", 0);
  if (offsets.dtype() != DType::kInt32 || offsets.ndim() != 1 || offsets.dim(0) < 1) {
    malformed("the offsets are not an int32 vector of n + 1", 0);
  }
  if (shape.dtype() != DType::kInt32 || shape.shape() != Shape{4}) malformed("the shape is not four int32", 0);
  const auto s = shape.values<const std::int32_t>();
  ImageGeometry g;
  g.planar = streams.info() == kJpegPlanarStreamsInfo || streams.info() == kZstdPlanarStreamsInfo;
  g.zstd = streams.info() == kZstdStreamsInfo || streams.info() == kZstdPlanarStreamsInfo;
  g.n = s[0];
  g.h = g.planar ? s[2] : s[1];
  g.w = g.planar ? s[3] : s[2];
  const std::int64_t channels = g.planar ? s[1] : s[3];
  const Shape declared(s.begin(), s.end());
  if (g.n != offsets.dim(0) - 1) {
    malformed("shape " + shape_text(declared) + " for " + std::to_string(offsets.dim(0) - 1) + " streams", 0);
  }
  if (channels != 3 || g.h < 1 || g.h > kMaxSide || g.w < 1 || g.w > kMaxSide) {
    malformed("shape " + shape_text(declared) + " is not RGB images of 1 to 65535 pixels a side", 0);
  }
  const auto bytes = checked_nbytes(declared, 1);
  if (!bytes || *bytes > limits.max_bytes) {
    malformed("shape " + shape_text(declared) + " is over the limit of " + std::to_string(limits.max_bytes) +
                  " decoded bytes",
              0);
  }
  const auto off = offsets.values<const std::int32_t>();
  for (std::size_t i = 0; i + 1 < off.size(); ++i) {
    if (off[i] < 0 || off[i + 1] < off[i]) malformed("offsets out of order at image " + std::to_string(i), 0);
  }
  if (off.front() != 0 || static_cast<std::uint64_t>(off.back()) != streams.nbytes()) {
    malformed("offsets span bytes " + std::to_string(off.front()) + " to " + std::to_string(off.back()) + " of " +
                  std::to_string(streams.nbytes()),
              0);
  }
  return g;
}

void decode_jpeg_chunk(const ImageGeometry& g, const std::uint8_t* bytes, std::span<const std::int32_t> off,
                       std::uint8_t* out, std::size_t begin, std::size_t end) {
  auto d = std::make_unique<Decompressor>();
  std::vector<std::uint8_t> row(static_cast<std::size_t>(g.w) * 3);
  for (std::size_t i = begin; i < end; ++i) {
    std::uint8_t* dst = out + i * g.image_bytes();
    const DecodeTarget target{&g, g.planar ? nullptr : dst, g.planar ? dst : nullptr, row.data()};
    char why[160] = "";
    const auto size = static_cast<std::size_t>(off[i + 1] - off[i]);
    if (!decode_protected(d.get(), bytes + off[i], size, &target, &why)) {
      const std::string reason = why[0] != '\0' ? why : d->err.message;
      malformed("image " + std::to_string(i) + ": " + reason, static_cast<std::uint64_t>(off[i]));
    }
  }
}

void decode_zstd_chunk(const ImageGeometry& g, const std::uint8_t* bytes, std::span<const std::int32_t> off,
                       std::uint8_t* out, std::size_t begin, std::size_t end) {
  std::vector<std::uint8_t> scratch(g.planar ? g.image_bytes() : 0);
  for (std::size_t i = begin; i < end; ++i) {
    std::uint8_t* dst = out + i * g.image_bytes();
    const auto size = static_cast<std::size_t>(off[i + 1] - off[i]);
    const auto why = decode_zstd(bytes + off[i], size, g, g.planar ? scratch.data() : dst);
    if (why) malformed("image " + std::to_string(i) + ": " + *why, static_cast<std::uint64_t>(off[i]));
    if (g.planar) scatter_image(scratch.data(), g, dst);
  }
}

Tensor decode_triple(const Tensor& streams, const Tensor& offsets, const Tensor& shape, const DecompressLimits& limits,
                     int threads) {
  const ImageGeometry g = declared_geometry(streams, offsets, shape, limits);
  const auto s = shape.values<const std::int32_t>();
  Tensor images = Tensor::allocate(DType::kUInt8, Shape(s.begin(), s.end()));
  const auto off = offsets.values<const std::int32_t>();
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(streams.data());
  auto* out = reinterpret_cast<std::uint8_t*>(images.data());
  auto decode_chunk = g.zstd ? decode_zstd_chunk : decode_jpeg_chunk;
  run_in_chunks(static_cast<std::size_t>(g.n), threads,
                [&](std::size_t begin, std::size_t end) { decode_chunk(g, bytes, off, out, begin, end); });
  return images;
}

int parse_number(std::string_view text, std::string_view whole, const char* what, int low, int high) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < low || value > high) {
    throw ArgumentError("--wire " + std::string(whole) + ": " + what + " must be " + std::to_string(low) + " to " +
                        std::to_string(high) + ", not '" + std::string(text) + "'");
  }
  return value;
}

}  // namespace

std::string WireFormat::describe() const {
  if (kind == Kind::kRaw) return "raw";
  if (kind == Kind::kZstd) return "zstd:" + std::to_string(zstd_level);
  return "jpeg:" + std::to_string(quality) + (chroma_420 ? ",420" : ",444");
}

WireFormat parse_wire_format(std::string_view text) {
  WireFormat f;
  if (text == "raw") return f;
  if (text == "zstd" || text.substr(0, 5) == "zstd:") {
    f.kind = WireFormat::Kind::kZstd;
    if (text.size() > 4) f.zstd_level = parse_number(text.substr(5), text, "the zstd level", 1, 19);
    return f;
  }
  if (text.substr(0, 4) != "jpeg" || (text.size() > 4 && text[4] != ':' && text[4] != ',')) {
    throw ArgumentError("--wire " + std::string(text) + ": expected raw, jpeg[:QUALITY][,444|420] or zstd[:LEVEL]");
  }
  f.kind = WireFormat::Kind::kJpeg;
  std::string_view rest = text.substr(4);
  if (!rest.empty() && rest[0] == ':') {
    const std::size_t comma = rest.find(',');
    f.quality = parse_number(rest.substr(1, comma == std::string_view::npos ? std::string_view::npos : comma - 1), text,
                             "the JPEG quality", 1, 100);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma);
  }
  if (rest == ",420") {
    f.chroma_420 = true;
  } else if (!rest.empty() && rest != ",444") {
    throw ArgumentError("--wire " + std::string(text) + ": the chroma must be 444 or 420, not '" +
                        std::string(rest.substr(1)) + "'");
  }
  return f;
}

TensorList compress_images(const Tensor& images, const WireFormat& format, int threads) {
  if (format.kind == WireFormat::Kind::kRaw) throw ArgumentError("compress_images: the raw format compresses nothing");
  ImageGeometry g = images_geometry(images);
  g.zstd = format.kind == WireFormat::Kind::kZstd;
  const jpeg::JpegEncoding encoding{.quality = format.quality, .chroma_444 = !format.chroma_420};
  std::vector<ByteBuffer> encoded(static_cast<std::size_t>(g.n));
  run_in_chunks(encoded.size(), threads, [&](std::size_t begin, std::size_t end) {
    std::vector<std::uint8_t> gathered, predicted;
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint8_t* rgb = interleaved(images, g, static_cast<std::int64_t>(i), gathered);
      encoded[i] = g.zstd ? encode_zstd(rgb, g, format.zstd_level, predicted)
                          : jpeg::encode_jpeg(rgb, static_cast<int>(g.w), static_cast<int>(g.h), encoding);
    }
  });
  std::vector<std::int64_t> offsets(encoded.size() + 1, 0);
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    offsets[i + 1] = offsets[i] + static_cast<std::int64_t>(encoded[i].size());
  }
  if (offsets.back() > std::numeric_limits<std::int32_t>::max()) {
    throw ArgumentError("compressed images: the batch's streams are over 2 GiB");
  }
  const std::string_view info = g.zstd ? (g.planar ? kZstdPlanarStreamsInfo : kZstdStreamsInfo)
                                       : (g.planar ? kJpegPlanarStreamsInfo : kJpegStreamsInfo);
  Tensor streams = Tensor::allocate(DType::kUInt8, {offsets.back()}, info);
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    if (!encoded[i].empty()) std::memcpy(streams.data() + offsets[i], encoded[i].data(), encoded[i].size());
  }
  // int32, which the reference receives without allow64.
  const std::vector<std::int32_t> offsets32(offsets.begin(), offsets.end());
  const Shape& s = images.shape();
  const std::vector<std::int32_t> shape32(s.begin(), s.end());
  return {
      std::move(streams),
      Tensor::from_values<std::int32_t>({static_cast<std::int64_t>(offsets32.size())}, offsets32, kImageOffsetsInfo),
      Tensor::from_values<std::int32_t>({4}, shape32, kImageShapeInfo)};
}

bool holds_compressed_images(std::span<const Tensor> batch, std::size_t index) noexcept {
  if (index + 2 >= batch.size()) return false;
  const std::string_view info = batch[index].info();
  const bool streams = info == kJpegStreamsInfo || info == kJpegPlanarStreamsInfo || info == kZstdStreamsInfo ||
                       info == kZstdPlanarStreamsInfo;
  return streams && batch[index + 1].info() == kImageOffsetsInfo && batch[index + 2].info() == kImageShapeInfo;
}

std::optional<std::uint64_t> compressed_image_count(std::span<const Tensor> batch) noexcept {
  if (!holds_compressed_images(batch)) return std::nullopt;
  const std::int64_t offsets = batch[1].ndim() == 1 ? batch[1].shape()[0] : 0;
  return offsets > 0 ? static_cast<std::uint64_t>(offsets - 1) : 0;
}

void decompress_images(TensorList& batch, const DecompressLimits& limits, int threads) {
  // The raw wire's batches, every one a receiver takes: a look at the infos, no copy.
  bool any = false;
  for (std::size_t i = 0; i < batch.size() && !any; ++i) any = holds_compressed_images(batch, i);
  if (!any) return;
  TensorList out;
  out.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (holds_compressed_images(batch, i)) {
      out.push_back(decode_triple(batch[i], batch[i + 1], batch[i + 2], limits, threads));
      i += 2;
    } else {
      out.push_back(batch[i]);
    }
  }
  batch = std::move(out);
}

}  // namespace tensorcom
