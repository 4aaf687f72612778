#include "tensorcom/formats/shard_writer.h"

#include <string_view>
#include <utility>

#include "tensorcom/formats/tar_encoder.h"
#include "tensorcom/codec/error.h"

namespace tensorcom::formats {

namespace {

[[nodiscard]] bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

ShardPattern::ShardPattern(const std::string& pattern) {
  auto fail = [&](const std::string& why) {
    return ArgumentError("output pattern '" + pattern + "' " + why +
                         " (it needs exactly one integer conversion such as %06d)");
  };
  bool found = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    std::string& text = found ? suffix_ : prefix_;
    if (pattern[i] != '%') {
      text += pattern[i];
      continue;
    }
    if (i + 1 < pattern.size() && pattern[i + 1] == '%') {
      text += '%';
      ++i;
      continue;
    }
    if (found) throw fail("has more than one conversion");
    found = true;
    std::size_t j = i + 1;
    for (; j < pattern.size() && std::string_view("0-+ ").find(pattern[j]) != std::string_view::npos; ++j) {
      if (pattern[j] == '0') zero_pad_ = true;
      if (pattern[j] == '-') left_align_ = true;
      if (pattern[j] == '+') sign_ = '+';
      if (pattern[j] == ' ' && sign_ != '+') sign_ = ' ';
    }
    for (; j < pattern.size() && is_digit(pattern[j]); ++j) {
      width_ = width_ * 10 + static_cast<std::size_t>(pattern[j] - '0');
      if (width_ > 64) throw fail("has a width over 64");
    }
    if (j >= pattern.size() || std::string_view("diu").find(pattern[j]) == std::string_view::npos)
      throw fail("has a conversion other than %d, %i or %u");
    i = j;
  }
  if (!found) throw fail("has no conversion");
}

std::string ShardPattern::format(std::uint64_t shard) const {
  std::string number = std::to_string(shard);
  if (sign_) number.insert(number.begin(), sign_);
  if (number.size() < width_) {
    std::size_t fill = width_ - number.size();
    if (left_align_) {
      number.append(fill, ' ');
    } else if (zero_pad_) {
      number.insert(sign_ ? 1 : 0, fill, '0');  // printf pads after the sign
    } else {
      number.insert(0, fill, ' ');
    }
  }
  return prefix_ + number + suffix_;
}

ShardWriter::ShardWriter(ShardPattern pattern, ShardLimits limits) : pattern_(std::move(pattern)), limits_(limits) {}

bool ShardWriter::fits(std::size_t sample_bytes) const {
  const ShardSummary& shard = current_->summary;
  return shard.samples + 1 <= limits_.max_count && shard.bytes + sample_bytes + kTarEndSize <= limits_.max_bytes;
}

void ShardWriter::open_next() {
  ShardSummary summary;
  summary.path = pattern_.format(done_.size());
  create_parent_directories(summary.path);
  current_.emplace(OpenShard{AtomicFile(summary.path), std::move(summary)});
}

void ShardWriter::complete_current() {
  static const std::byte kEnd[kTarEndSize] = {};
  OpenShard& shard = *current_;
  shard.file.write(kEnd);
  shard.summary.bytes += kTarEndSize;
  shard.file.commit();
  done_.push_back(std::move(shard.summary));
  current_.reset();
}

void ShardWriter::add(std::span<const std::byte> sample) {
  if (current_ && current_->summary.samples > 0 && !fits(sample.size())) complete_current();
  if (!current_) open_next();
  current_->file.write(sample);
  current_->summary.samples += 1;
  current_->summary.bytes += sample.size();
}

std::vector<ShardSummary> ShardWriter::finish() {
  if (current_) complete_current();
  return std::move(done_);
}

}  // namespace tensorcom::formats
