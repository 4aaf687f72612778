#include "jpeg/jpeg_interval_decoder.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include <jerror.h>
#include <jpegint.h>

#include "jpeg/entropy_bytes.h"

namespace tensorcom::imaging {

namespace {

// Zigzag position to natural position, with libjpeg's 16 extra entries: a
// corrupt run can carry k past 63 by 15, and lands on the last coefficient.
constexpr int kNatural[64 + 16] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33,
                                   40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36,
                                   29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54,
                                   47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

// A fast-table entry (64 bits): bits 0-5 the bits it consumes (0: no code
// of up to kFastBits bits starts here; six bits, so that the entry itself
// is the shift count, one step less between a lookup and the next),
// kComplete when they include the extra bits (the value is then in bits
// 16-31), kZeroSize for symbols without extra bits (end of block, a run of
// 16 zeros, a DC difference of 0), run in bits 8-11, extra-bit count in
// bits 12-15.
//
// An AC entry whose complete value symbol leaves room in kFastBits for a
// second complete symbol holds both: the bits both take (bits 0-5), the
// first's alone (kFirstLength), and where the second puts its value
// (kSecondRun, bits 48-63) and moves the block's position (kSecondAdvance:
// its run and one, or 64 when it is the end of the block). A lone value
// symbol's second is a zero written where the next coefficient goes (still
// zero then) and no advance, so both decode with the same instructions.
constexpr int kFastBits = 10;
constexpr std::uint64_t kLength = 63;
constexpr std::uint64_t kComplete = 1u << 6;
constexpr std::uint64_t kZeroSize = 1u << 7;
constexpr int kSecondRun = 32;      // 4 bits
constexpr int kSecondAdvance = 36;  // 7 bits
constexpr int kFirstLength = 43;    // 5 bits
constexpr int kSecondValue = 48;    // 16 bits

// JPEG's sign extension of an s-bit value (libjpeg's HUFF_EXTEND).
inline int extend(std::uint32_t bits, int s) {
  const int v = static_cast<int>(bits);
  return v < (1 << (s - 1)) ? v - (1 << s) + 1 : v;
}

}  // namespace

struct JpegIntervalDecoder::Table {
  std::uint64_t fast[1 << kFastBits] = {};
  // For codes longer than kFastBits, canonically: the codes of length l
  // are valoffset[l] + the symbol's index ... up to maxcode[l].
  std::int32_t maxcode[18] = {};
  std::int32_t valoffset[17] = {};
  std::uint8_t huffval[256] = {};
  bool present = false;  // built for the scan being decoded
  // What it was last built from: encoders that use the standard tables
  // (cameras, OpenCV, Pillow, `make-shards --max-side`) give every image
  // the same ones, and building one costs more than a small image's header.
  bool built = false;
  bool built_dc = false;
  std::uint8_t built_bits[17] = {};

  // From a table libjpeg has read and checked (jpeg_make_d_derived_tbl ran
  // at the start of the scan).
  void build(const JHUFF_TBL& t, bool dc) {
    present = true;
    if (built_from(t, dc)) return;
    build_fresh(t, dc);
    std::memcpy(built_bits, t.bits, sizeof built_bits);
    built_dc = dc;
    built = true;
  }

  // Whether the last build was from these codes and symbols (the symbols
  // past the codes' count are never read).
  [[nodiscard]] bool built_from(const JHUFF_TBL& t, bool dc) const {
    if (!built || built_dc != dc || std::memcmp(built_bits, t.bits, sizeof built_bits) != 0) return false;
    int symbols = 0;
    for (int l = 1; l <= 16; ++l) symbols += t.bits[l];
    return std::memcmp(huffval, t.huffval, static_cast<std::size_t>(std::min(symbols, 256))) == 0;
  }

  void build_fresh(const JHUFF_TBL& t, bool dc) {
    std::fill(std::begin(fast), std::end(fast), 0u);
    std::memcpy(huffval, t.huffval, sizeof huffval);
    int index = 0;
    std::int32_t code = 0;
    for (int l = 1; l <= 16; ++l) {
      const int count = t.bits[l];
      if (count == 0 || index + count > 256) {
        maxcode[l] = -1;
      } else {
        valoffset[l] = index - code;
        for (int i = 0; i < count; ++i, ++index, ++code) {
          if (l <= kFastBits) fill_fast(code, l, huffval[index], dc);
        }
        maxcode[l] = code - 1;
      }
      code <<= 1;
    }
    maxcode[17] = 0x7FFFFFFF;  // the sentinel: every code ends by 17 bits
    if (!dc) pair_symbols();
  }

  // Makes each AC entry of a value symbol that a second complete symbol
  // follows within kFastBits (a value, or the end of the block) hold both.
  void pair_symbols() {
    std::uint64_t single[1 << kFastBits];
    std::copy(std::begin(fast), std::end(fast), std::begin(single));
    for (std::uint64_t& e : fast) {
      if ((e & (kComplete | kZeroSize)) != kComplete) continue;
      const int first = static_cast<int>(e & kLength);
      const auto index = static_cast<std::size_t>(&e - fast);
      // The second's code and extra bits lie wholly in the index's last
      // kFastBits - first bits when its entry is that short.
      const std::uint64_t next = single[(index << first) & ((1u << kFastBits) - 1)];
      const int second = static_cast<int>(next & kLength);
      if (!(next & kComplete) || second == 0 || first + second > kFastBits) continue;
      const int run = static_cast<int>((next >> 8) & 15);
      std::uint64_t advance = 0;
      if (!(next & kZeroSize)) {
        advance = static_cast<std::uint64_t>(run) + 1;
      } else if (run == 0) {
        advance = DCTSIZE2;  // the end of the block
      } else {
        continue;  // a run of 16 zeros: left to the slow step
      }
      e = (e & ~kLength) | static_cast<std::uint64_t>(first + second) | static_cast<std::uint64_t>(run) << kSecondRun |
          advance << kSecondAdvance | (next & 0xFFFF0000u) << (kSecondValue - 16);
    }
  }

  // The entries of the codes that start with `code` (`length` bits): one
  // for each value of the extra bits when they fit, else the same entry.
  void fill_fast(std::int32_t code, int length, std::uint8_t symbol, bool dc) {
    const int run = dc ? 0 : symbol >> 4;
    const int size = symbol & 15;  // DC symbols are sizes, at most 15 (libjpeg checked)
    const int spare = kFastBits - length;
    std::uint64_t* entries = fast + (static_cast<std::size_t>(code) << spare);
    const std::uint64_t e = static_cast<std::uint64_t>(run) << 8 | static_cast<std::uint64_t>(size) << 12;
    if (size == 0) {
      std::fill_n(entries, 1 << spare,
                  e | kComplete | kZeroSize | static_cast<std::uint64_t>(length) |
                      static_cast<std::uint64_t>(length) << kFirstLength);
    } else if (length + size <= kFastBits) {
      // Each value of the extra bits, for every fill of the bits after them.
      const int after = spare - size;
      const std::uint64_t complete = e | kComplete | static_cast<std::uint64_t>(length + size) |
                                     static_cast<std::uint64_t>(length + size) << kFirstLength;
      for (std::uint32_t extra = 0; extra < (1u << size); ++extra) {
        std::fill_n(entries + (static_cast<std::size_t>(extra) << after), 1 << after,
                    complete | static_cast<std::uint64_t>(static_cast<std::uint16_t>(extend(extra, size))) << 16);
      }
    } else {
      std::fill_n(entries, 1 << spare, e | static_cast<std::uint64_t>(length));
    }
  }
};

// What libjpeg calls: the public part of an entropy decoder, then us.
struct JpegIntervalDecoder::Hook {
  jpeg_entropy_decoder pub;
  JpegIntervalDecoder* self;
};

JpegIntervalDecoder::JpegIntervalDecoder() : tables_(8), hook_(std::make_unique<Hook>()) {}
JpegIntervalDecoder::~JpegIntervalDecoder() = default;

namespace {
void no_new_pass(j_decompress_ptr) {}  // a single scan: libjpeg starts no other
}  // namespace

bool JpegIntervalDecoder::install(jpeg_decompress_struct* cinfo, std::span<const std::byte> jpeg,
                                  std::span<const ByteRange> intervals, bool unstuffed) {
  if (cinfo->progressive_mode || cinfo->arith_code || cinfo->comps_in_scan != cinfo->num_components ||
      cinfo->comps_in_scan > 4 || cinfo->blocks_in_MCU > 10 || cinfo->blocks_in_MCU < 1 || cinfo->Ss != 0 ||
      cinfo->Se != DCTSIZE2 - 1 || cinfo->Ah != 0 || cinfo->Al != 0) {
    return false;
  }
  const std::size_t mcus = static_cast<std::size_t>(cinfo->MCUs_per_row) * cinfo->MCU_rows_in_scan;
  const std::size_t per = cinfo->restart_interval ? cinfo->restart_interval : mcus;
  if (mcus == 0 || per > INT_MAX || intervals.size() != (mcus + per - 1) / per) return false;
  const std::size_t after = unstuffed ? kUnstuffedPadding : 0;  // bytes that must follow each
  for (const ByteRange& r : intervals) {
    if (r.begin > r.end || r.end + after > jpeg.size()) return false;
  }
  for (int ci = 0; ci < cinfo->comps_in_scan; ++ci) {
    const jpeg_component_info* comp = cinfo->cur_comp_info[ci];
    if (comp->dc_tbl_no < 0 || comp->dc_tbl_no > 3 || comp->ac_tbl_no < 0 || comp->ac_tbl_no > 3 ||
        !cinfo->dc_huff_tbl_ptrs[comp->dc_tbl_no] || !cinfo->ac_huff_tbl_ptrs[comp->ac_tbl_no]) {
      return false;
    }
  }
  for (Table& t : tables_) t.present = false;
  for (int blkn = 0; blkn < cinfo->blocks_in_MCU; ++blkn) {
    const int ci = cinfo->MCU_membership[blkn];
    if (ci < 0 || ci >= cinfo->comps_in_scan) return false;
    const jpeg_component_info* comp = cinfo->cur_comp_info[ci];
    Table& dc = tables_[static_cast<std::size_t>(comp->dc_tbl_no)];
    Table& ac = tables_[4 + static_cast<std::size_t>(comp->ac_tbl_no)];
    if (!dc.present) dc.build(*cinfo->dc_huff_tbl_ptrs[comp->dc_tbl_no], true);
    if (!ac.present) ac.build(*cinfo->ac_huff_tbl_ptrs[comp->ac_tbl_no], false);
    dc_[blkn] = &dc;
    ac_[blkn] = &ac;
    component_of_block_[blkn] = ci;
  }
  blocks_in_mcu_ = cinfo->blocks_in_MCU;
  mcus_per_interval_ = static_cast<int>(per);
  data_ = reinterpret_cast<const std::uint8_t*>(jpeg.data());
  unstuffed_input_ = unstuffed;
  intervals_ = intervals;
  next_interval_ = 0;
  next_in_interval_ = 0;
  interval_ = kNoInterval;
  hook_->pub.start_pass = no_new_pass;
  hook_->pub.decode_mcu = decode_mcu;
  hook_->pub.insufficient_data = FALSE;
  hook_->self = this;
  cinfo->entropy = &hook_->pub;
  return true;
}

// The interval's bytes, stuffing taken out and zeros after them (see
// entropy_bytes.h): copied here unless the caller gave them so.
void JpegIntervalDecoder::start_interval(j_decompress_ptr, std::size_t interval) {
  const ByteRange r = intervals_[interval];
  if (unstuffed_input_) {
    stream_ = data_ + r.begin;
    size_ = r.end - r.begin;
  } else {
    unstuffed_.resize(static_cast<std::size_t>(r.end - r.begin) + kUnstuffedPadding);
    std::uint8_t* out = unstuff(data_ + r.begin, data_ + r.end, unstuffed_.data());
    std::memset(out, 0, kUnstuffedPadding);
    stream_ = unstuffed_.data();
    size_ = static_cast<std::size_t>(out - unstuffed_.data());
  }
  bits_ = 0;
  bit_count_ = 0;
  next_ = 0;
  used_up_ = false;
  interval_ = interval;
  std::fill(std::begin(last_dc_), std::end(last_dc_), 0);
}

namespace {

// The bit reader's state, in locals while a block decodes.
struct Bits {
  std::uint64_t bits;
  int count;
  std::size_t next;
  const std::uint8_t* data;
  std::size_t size;  // zeros follow: loads from past it read them

  // At least 56 valid bits, without a branch: the next eight bytes go below
  // the valid ones and the offset moves by the whole bytes taken. The load's
  // address was settled by the previous refill, so it waits on nothing.
  void refill() {
    std::uint64_t word;
    std::memcpy(&word, data + std::min(next, size), 8);
    bits |= __builtin_bswap64(word) >> count;
    next += static_cast<std::size_t>((63 - count) >> 3);
    count |= 56;
  }
  // Whether more bits were taken than the data has.
  [[nodiscard]] bool past_end() const { return next * 8 - static_cast<std::size_t>(count) > size * 8; }
  [[nodiscard]] std::uint32_t peek(int n) const { return static_cast<std::uint32_t>(bits >> (64 - n)); }
  void consume(int n) {
    bits <<= n;
    count -= n;
  }
  // n extra bits, 1 <= n <= 15.
  std::uint32_t take(int n) {
    const std::uint32_t v = peek(n);
    consume(n);
    return v;
  }
};

// A code longer than the fast table's reach, found from the next 16 bits
// as libjpeg's jpeg_huff_decode finds it: its length and symbol; a code no
// table has takes 17 bits and gives 0. A function of values alone: the bit
// reader's state stays in registers around the call.
struct LongCode {
  int length;
  int symbol;
};

[[gnu::noinline]] LongCode long_code(const JpegIntervalDecoder::Table& t, std::uint32_t next16) {
  for (int l = kFastBits + 1; l <= 16; ++l) {
    const auto code = static_cast<std::int32_t>(next16 >> (16 - l));
    if (code <= t.maxcode[l]) return {l, t.huffval[(t.valoffset[l] + code) & 0xFF]};
  }
  return {17, 0};
}

struct Symbol {
  int run;
  int size;
  int value;  // what the extra bits give (0 for size 0)
};

// The symbol an entry did not complete, its extra bits read. The caller
// refilled: the longest code (16 bits) and its extra bits (15) fit in 56.
[[gnu::always_inline]] inline Symbol finish_symbol(j_decompress_ptr cinfo, const JpegIntervalDecoder::Table& t,
                                                   std::uint64_t e, bool dc, Bits& b) {
  Symbol s{};
  if (e & kLength) {
    b.consume(static_cast<int>(e & kLength));
    s.run = static_cast<int>((e >> 8) & 15);
    s.size = static_cast<int>((e >> 12) & 15);
  } else {
    const LongCode code = long_code(t, b.peek(16));
    b.consume(code.length);
    if (code.length > 16) WARNMS(cinfo, JWRN_HUFF_BAD_CODE);
    s.run = dc ? 0 : code.symbol >> 4;
    s.size = code.symbol & 15;
  }
  if (s.size) s.value = extend(b.take(s.size), s.size);
  return s;
}

}  // namespace

void JpegIntervalDecoder::decode_blocks(j_decompress_ptr cinfo, JBLOCKROW* blocks) {
  Bits b{bits_, bit_count_, next_, stream_, size_};
  for (int blkn = 0; blkn < blocks_in_mcu_; ++blkn) {
    JCOEF* block = blocks ? blocks[blkn][0] : discarded_;
    // DC: the difference from the component's last DC.
    const Table& dc = *dc_[blkn];
    b.refill();
    const std::uint64_t e = dc.fast[b.peek(kFastBits)];
    int diff = 0;
    if (e & kComplete) {
      b.consume(static_cast<int>(e & kLength));
      diff = static_cast<std::int16_t>(e >> 16);
    } else {
      diff = finish_symbol(cinfo, dc, e, true, b).value;
    }
    int& last = last_dc_[component_of_block_[blkn]];
    if ((last >= 0 && diff > INT_MAX - last) || (last < 0 && diff < INT_MIN - last)) {
      ERREXIT(cinfo, JERR_BAD_DCT_COEF);
    }
    last += diff;
    block[0] = static_cast<JCOEF>(last);
    // AC: (run, size) symbols until the end of the block. A refill leaves
    // at least 56 bits, enough for three symbols the fast table completes
    // (kFastBits each); any other refills first itself.
    const Table& ac = *ac_[blkn];
    int k = 1;
    // One entry (one symbol or two); false once the block is done.
    auto step = [&]() {
      const std::uint64_t e = ac.fast[b.peek(kFastBits)];
      const int first = k + static_cast<int>((e >> 8) & 15);
      // The common case: value symbols, in the entry, the first not at the
      // block's last coefficient (whose end would leave a second symbol to
      // the next block).
      if ((e & (kComplete | kZeroSize)) == kComplete && first < DCTSIZE2 - 1) {
        b.consume(static_cast<int>(e & kLength));
        block[kNatural[first]] = static_cast<JCOEF>(e >> 16);
        block[kNatural[first + 1 + static_cast<int>((e >> kSecondRun) & 15)]] = static_cast<JCOEF>(e >> kSecondValue);
        k = first + 1 + static_cast<int>((e >> kSecondAdvance) & 127);
        return k < DCTSIZE2;
      }
      Symbol s{};
      if (e & kComplete) {  // the first symbol alone
        b.consume(static_cast<int>((e >> kFirstLength) & 31));
        s.run = static_cast<int>((e >> 8) & 15);
        s.size = static_cast<int>((e >> 12) & 15);
        s.value = static_cast<std::int16_t>(e >> 16);
      } else {
        b.refill();
        s = finish_symbol(cinfo, ac, e, false, b);
      }
      if (s.size == 0) {
        if (s.run != 15) return false;  // end of block
        k += 16;
        return k < DCTSIZE2;
      }
      k += s.run;
      block[kNatural[k]] = static_cast<JCOEF>(s.value);
      return ++k < DCTSIZE2;
    };
    static_assert(3 * kFastBits <= 56);
    do {
      b.refill();
    } while (step() && step() && step());
  }
  bits_ = b.bits;
  bit_count_ = b.count;
  next_ = b.next;
  if (b.past_end()) {
    WARNMS(cinfo, JWRN_HIT_MARKER);
    used_up_ = true;
  }
}

boolean JpegIntervalDecoder::decode_mcu(j_decompress_ptr cinfo, JBLOCKROW* blocks) {
  JpegIntervalDecoder& self = *reinterpret_cast<Hook*>(cinfo->entropy)->self;
  // Which interval the MCU is in, counted rather than divided: libjpeg
  // calls once per MCU, skipped ones included.
  const std::size_t interval = self.next_interval_;
  if (++self.next_in_interval_ == self.mcus_per_interval_) {
    self.next_in_interval_ = 0;
    ++self.next_interval_;
  }
  // More MCUs than the intervals hold cannot be asked for (install checked
  // the count); they would stay zero, as libjpeg leaves MCUs past its data.
  if (interval >= self.intervals_.size()) return TRUE;
  // A region decode skips the MCUs above and beside its box: with an
  // interval for each, nothing needs reading.
  if (!blocks && self.mcus_per_interval_ == 1) return TRUE;
  if (interval != self.interval_) self.start_interval(cinfo, interval);
  if (!self.used_up_) self.decode_blocks(cinfo, blocks);
  return TRUE;
}

}  // namespace tensorcom::imaging
