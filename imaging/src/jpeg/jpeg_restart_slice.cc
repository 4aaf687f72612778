#include "jpeg/jpeg_restart_slice.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "jpeg/entropy_bytes.h"

namespace tensorcom::imaging {

namespace {

constexpr std::uint8_t kSOF0 = 0xC0, kSOF1 = 0xC1, kDHT = 0xC4, kSOI = 0xD8, kEOI = 0xD9, kSOS = 0xDA, kDRI = 0xDD,
                       kRST0 = 0xD0, kRST7 = 0xD7, kAPP1 = 0xE1, kAPP13 = 0xED, kAPP15 = 0xEF, kCOM = 0xFE;

// What the headers say, as far as slicing needs it.
struct Layout {
  std::size_t height_field = 0;  // offset of the frame header's 16-bit height (width follows)
  std::size_t scan_start = 0;    // first byte of entropy-coded data
  int width = 0, height = 0;
  int mcu_width = 0, mcu_height = 0;
  int components = 0;
  int restart_interval = 0;                               // MCUs, 0 if none
  std::vector<std::pair<std::size_t, std::size_t>> kept;  // header segments to copy: [begin, end)
};

int be16(const std::uint8_t* p) { return (p[0] << 8) | p[1]; }

bool is_sequential_huffman_frame(std::uint8_t m) { return m == kSOF0 || m == kSOF1; }

// Any other start-of-frame: progressive, lossless, arithmetic, hierarchical.
bool is_other_frame(std::uint8_t m) { return m >= 0xC2 && m <= 0xCF && m != kDHT && m != 0xC8 && m != 0xCC; }

// Segments a decoder of pixels has no use for; leaving them out saves
// copying (EXIF thumbnails can be tens of kilobytes). APP0 (JFIF) and APP14
// (Adobe: the colour transform) stay.
bool is_droppable(std::uint8_t m) { return (m >= kAPP1 && m <= kAPP13) || m == kAPP15 || m == kCOM; }

bool read_frame(const std::uint8_t* seg, std::size_t length, Layout& layout) {
  if (length < 8) return false;
  layout.height = be16(seg + 3);
  layout.width = be16(seg + 5);
  const int components = seg[7];
  layout.components = components;
  if (seg[2] != 8 || layout.height == 0 || layout.width == 0 || components < 1 ||
      length < 8 + 3 * static_cast<std::size_t>(components)) {
    return false;
  }
  int hmax = 1, vmax = 1;
  for (int i = 0; i < components; ++i) {
    int h = seg[9 + 3 * i] >> 4, v = seg[9 + 3 * i] & 15;
    if (h < 1 || h > 4 || v < 1 || v > 4) return false;
    hmax = std::max(hmax, h);
    vmax = std::max(vmax, v);
  }
  // One component is coded non-interleaved: its MCU is one 8x8 block.
  layout.mcu_width = components == 1 ? 8 : 8 * hmax;
  layout.mcu_height = components == 1 ? 8 : 8 * vmax;
  return true;
}

// Walks the segments up to the first scan. False if the file is not one we
// can slice (or is malformed: then the decoder will say what is wrong).
bool read_layout(const std::uint8_t* data, std::size_t size, Layout& layout) {
  if (size < 4 || data[0] != 0xFF || data[1] != kSOI) return false;
  bool frame = false;
  std::size_t pos = 2;
  for (;;) {
    while (pos < size && data[pos] == 0xFF && pos + 1 < size && data[pos + 1] == 0xFF) ++pos;  // fill bytes
    if (pos + 4 > size || data[pos] != 0xFF) return false;
    const std::uint8_t marker = data[pos + 1];
    const std::size_t length = static_cast<std::size_t>(be16(data + pos + 2));
    const std::size_t end = pos + 2 + length;
    if (length < 2 || end > size) return false;
    const std::uint8_t* seg = data + pos + 2;  // starts at the length field
    if (is_other_frame(marker)) return false;
    if (is_sequential_huffman_frame(marker)) {
      if (frame || !read_frame(seg, length, layout)) return false;
      frame = true;
      layout.height_field = pos + 5;
    } else if (marker == kDRI) {
      if (length != 4) return false;
      layout.restart_interval = be16(seg + 2);
    } else if (marker == kSOS) {
      // A single scan holding every component; a second scan would follow
      // the first's data, which slicing does not keep. Its spectral
      // selection is a sequential scan's (libjpeg decodes others with a
      // warning; the interval decoder refuses them).
      if (!frame || length < 3 || seg[2] != layout.components) return false;
      const std::size_t params = 3 + 2 * static_cast<std::size_t>(seg[2]);  // Ss, Se, Ah/Al
      if (length < params + 3 || seg[params] != 0 || seg[params + 1] != 63 || seg[params + 2] != 0) return false;
      layout.kept.emplace_back(pos, end);
      layout.scan_start = end;
      return true;
    }
    if (!is_droppable(marker)) layout.kept.emplace_back(pos, end);
    pos = end;
  }
}

// How restart intervals tile the image: `cols` x `rows` units of
// unit_width x unit_height pixels, in raster order.
struct Tiling {
  int unit_width = 0, unit_height = 0;
  int cols = 0, rows = 0;
};

std::optional<Tiling> tiling_of(const Layout& layout) {
  const int mcus_per_row = (layout.width + layout.mcu_width - 1) / layout.mcu_width;
  const int mcu_rows = (layout.height + layout.mcu_height - 1) / layout.mcu_height;
  Tiling t;
  if (layout.restart_interval == 1) {
    t = {layout.mcu_width, layout.mcu_height, mcus_per_row, mcu_rows};
  } else if (layout.restart_interval > 0 && layout.restart_interval % mcus_per_row == 0) {
    const int rows_per_unit = layout.restart_interval / mcus_per_row;
    t = {mcus_per_row * layout.mcu_width, rows_per_unit * layout.mcu_height, 1,
         (mcu_rows + rows_per_unit - 1) / rows_per_unit};
  } else {
    return std::nullopt;
  }
  return t;
}

// Where each restart interval's data begins and ends, for intervals
// [0, needed), checking that every marker is there and in sequence.
bool find_intervals(const std::uint8_t* data, std::size_t size, std::size_t scan_start, std::size_t needed,
                    std::vector<std::size_t>& begins, std::vector<std::size_t>& ends) {
  begins.assign(1, scan_start);
  ends.clear();
  if (size < 2) return false;
  // Each 0xFF but the last byte, with the byte after it: a stuffed 0xFF (00)
  // or a fill byte before a marker (FF) go by, a restart marker ends an
  // interval, any other marker the scan.
  for_each_ff(data, scan_start, size - 1, [&](std::size_t p) {
    const std::uint8_t next = data[p + 1];
    if (next == 0x00 || next == 0xFF) return true;
    if (next >= kRST0 && next <= kRST7) {
      if (static_cast<std::size_t>(next - kRST0) != ends.size() % 8) return false;
      ends.push_back(p);
      begins.push_back(p + 2);
      return ends.size() < needed;
    }
    ends.push_back(p);  // the end of the scan: EOI, or another marker
    return false;
  });
  return ends.size() >= needed;
}

// The intervals of the rectangle `cells` (in intervals) of a grid `cols`
// wide, in raster order, as JPEG data: to `o` from offset `at`, restart
// markers renumbered from 0 between them; returns the offset after them.
// Where each lies goes to *intervals, when given.
std::size_t write_intervals(const std::uint8_t* data, const std::vector<std::size_t>& begins,
                            const std::vector<std::size_t>& ends, int cols, const PixelBox& cells, std::uint8_t* o,
                            std::size_t at, std::vector<ByteRange>* intervals) {
  std::size_t written = 0;  // intervals so far
  for (int r = cells.y; r < cells.y + cells.height; ++r) {
    for (int c = cells.x; c < cells.x + cells.width; ++c) {
      const auto i = static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(c);
      if (written++ > 0) {  // the marker between two intervals, numbered in the slice's order
        o[at++] = 0xFF;
        o[at++] = static_cast<std::uint8_t>(kRST0 + (written - 2) % 8);
      }
      std::memcpy(o + at, data + begins[i], ends[i] - begins[i]);
      if (intervals) {
        intervals->push_back({static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(at + ends[i] - begins[i])});
      }
      at += ends[i] - begins[i];
    }
  }
  return at;
}

// The same intervals unstuffed one after another into `unstuffed`, each
// followed by kUnstuffedPadding zero bytes; where each lies goes to
// `intervals`. `bytes` bounds their stuffed size.
void write_intervals_unstuffed(const std::uint8_t* data, std::size_t size, const std::vector<std::size_t>& begins,
                               const std::vector<std::size_t>& ends, int cols, const PixelBox& cells, std::size_t bytes,
                               std::vector<std::byte>& unstuffed, std::vector<ByteRange>& intervals) {
  const auto count = static_cast<std::size_t>(cells.width) * static_cast<std::size_t>(cells.height);
  // unstuff_wide's spare room: what it writes past an interval lands in
  // the padding and the next interval, both written after it, or here.
  constexpr std::size_t kSpare = 16;
  unstuffed.resize(bytes + count * kUnstuffedPadding + kSpare);
  auto* base = reinterpret_cast<std::uint8_t*>(unstuffed.data());
  std::uint8_t* o = base;
  for (int r = cells.y; r < cells.y + cells.height; ++r) {
    for (int c = cells.x; c < cells.x + cells.width; ++c) {
      const auto i = static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(c);
      std::uint8_t* end = ends[i] + kSpare <= size ? unstuff_wide(data + begins[i], data + ends[i], o)
                                                   : unstuff(data + begins[i], data + ends[i], o);
      intervals.push_back({static_cast<std::uint32_t>(o - base), static_cast<std::uint32_t>(end - base)});
      std::memset(end, 0, kUnstuffedPadding);
      o = end + kUnstuffedPadding;
    }
  }
  unstuffed.resize(static_cast<std::size_t>(o - base));
}

}  // namespace

std::optional<PixelBox> slice_restart_intervals(std::span<const std::byte> jpeg, const PixelBox& want, int context,
                                                std::vector<std::byte>& out, std::vector<ByteRange>* intervals,
                                                std::vector<std::byte>* unstuffed) {
  const auto* data = reinterpret_cast<const std::uint8_t*>(jpeg.data());
  const std::size_t size = jpeg.size();
  if (size > UINT32_MAX) return std::nullopt;  // interval offsets are 32-bit
  Layout layout;
  if (!read_layout(data, size, layout)) return std::nullopt;
  const std::optional<Tiling> tiling = tiling_of(layout);
  if (!tiling) return std::nullopt;
  const Tiling& t = *tiling;
  // The slice's own edges are edges to the decoder: what lies within
  // `context` of them is decoded as if nothing were beyond.
  context = std::clamp(context, 0, 65535);
  const int left = std::max(want.x - context, 0);
  const int top = std::max(want.y - context, 0);
  const int right = std::min(want.x + want.width + context, layout.width);
  const int bottom = std::min(want.y + want.height + context, layout.height);
  if (left >= right || top >= bottom) return std::nullopt;
  const int col0 = left / t.unit_width, col1 = (right - 1) / t.unit_width + 1;
  const int row0 = top / t.unit_height, row1 = (bottom - 1) / t.unit_height + 1;
  // The region decoder already stops below its box: a whole JPEG's slice
  // must skip something above it or beside it to be worth making. Unstuffed
  // intervals are worth it anyway: libjpeg-turbo decodes a file with
  // restart markers on its slow path, the interval decoder only from them.
  const bool headers_only = unstuffed && intervals;
  if (row0 == 0 && col0 == 0 && col1 == t.cols && !headers_only) return std::nullopt;

  std::vector<std::size_t> begins, ends;
  const auto needed = static_cast<std::size_t>(row1 - 1) * t.cols + static_cast<std::size_t>(col1);
  begins.reserve(needed + 1);
  ends.reserve(needed);
  if (!find_intervals(data, size, layout.scan_start, needed, begins, ends)) return std::nullopt;

  PixelBox slice{col0 * t.unit_width, row0 * t.unit_height, 0, 0};
  slice.width = std::min(layout.width, col1 * t.unit_width) - slice.x;
  slice.height = std::min(layout.height, row1 * t.unit_height) - slice.y;

  const PixelBox cells{col0, row0, col1 - col0, row1 - row0};  // in intervals
  std::size_t bytes = 4;                                       // SOI and EOI
  for (auto [b, e] : layout.kept) bytes += e - b;
  std::size_t data_bytes = 0;  // of the intervals, with their markers
  for (int r = row0; r < row1; ++r) {
    const auto first = static_cast<std::size_t>(r) * t.cols + static_cast<std::size_t>(col0);
    const auto last = static_cast<std::size_t>(r) * t.cols + static_cast<std::size_t>(col1) - 1;
    data_bytes += ends[last] - begins[first] + 2 * static_cast<std::size_t>(col1 - col0);  // at most
  }
  if (intervals) intervals->clear();
  if (headers_only) {
    const auto count = static_cast<std::size_t>(cells.width) * static_cast<std::size_t>(cells.height);
    if (data_bytes + count * kUnstuffedPadding > UINT32_MAX) return std::nullopt;  // offsets are 32-bit
    write_intervals_unstuffed(data, size, begins, ends, t.cols, cells, data_bytes, *unstuffed, *intervals);
  } else {
    bytes += data_bytes;
  }
  out.resize(bytes);
  auto* o = reinterpret_cast<std::uint8_t*>(out.data());
  std::size_t at = 0;
  o[at++] = 0xFF;
  o[at++] = kSOI;
  for (auto [b, e] : layout.kept) {
    std::memcpy(o + at, data + b, e - b);
    if (b < layout.height_field && layout.height_field < e) {
      std::uint8_t* dims = o + at + (layout.height_field - b);
      dims[0] = static_cast<std::uint8_t>(slice.height >> 8);
      dims[1] = static_cast<std::uint8_t>(slice.height & 0xFF);
      dims[2] = static_cast<std::uint8_t>(slice.width >> 8);
      dims[3] = static_cast<std::uint8_t>(slice.width & 0xFF);
    }
    at += e - b;
  }
  if (!headers_only) at = write_intervals(data, begins, ends, t.cols, cells, o, at, intervals);
  o[at++] = 0xFF;
  o[at++] = kEOI;
  out.resize(at);
  return slice;
}

}  // namespace tensorcom::imaging
