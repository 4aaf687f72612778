// How a .ten file's tensors fall into lists: the signature a tensor is
// compared by, the shortest period of a sequence of signatures, and the list
// length TenListReader and salvage_ten settle on as they read. Internal to
// the codec.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensorcom/codec/ten_file.h"
#include "tensorcom/codec/tenbin.h"

namespace tensorcom::detail {

// What list-length inference compares: the first dimension is the batch
// size, which the last batch may lack.
struct Signature {
  DType dtype = DType::kUInt8;
  std::string info;
  Shape shape;
};

inline Signature signature_of(TensorHeader header) {
  return {header.dtype, std::move(header.info), std::move(header.shape)};
}

inline Signature signature_of(const Tensor& tensor) {
  return {tensor.dtype(), std::string(tensor.info()), tensor.shape()};
}

inline bool same_signature(const Signature& a, const Signature& b) noexcept {
  if (a.dtype != b.dtype || a.info != b.info || a.shape.size() != b.shape.size()) return false;
  return std::equal(a.shape.begin() + (a.shape.empty() ? 0 : 1), a.shape.end(),
                    b.shape.begin() + (b.shape.empty() ? 0 : 1));
}

// The shortest period of a sequence of signatures, grown one at a time: the
// failure function of Knuth-Morris-Pratt, so that a hostile file costs
// linear time.
class PeriodFinder {
 public:
  void add(Signature s) {
    const std::size_t i = signatures_.size();
    signatures_.push_back(std::move(s));
    std::size_t k = i == 0 ? 0 : border_[i - 1];
    while (k > 0 && !same_signature(signatures_[i], signatures_[k])) k = border_[k - 1];
    if (i > 0 && same_signature(signatures_[i], signatures_[k])) ++k;
    border_.push_back(k);
  }
  // Shortest p with s[i] == s[i - p] for every i >= p; 0 for none added.
  [[nodiscard]] std::size_t period() const noexcept { return size() - (border_.empty() ? 0 : border_.back()); }
  [[nodiscard]] std::size_t size() const noexcept { return signatures_.size(); }
  [[nodiscard]] const Signature& operator[](std::size_t i) const noexcept { return signatures_[i]; }
  // Keeps the first n signatures only; the finder is done with.
  void keep_first(std::size_t n) {
    signatures_.resize(std::min(n, signatures_.size()));
    signatures_.shrink_to_fit();
    border_.clear();
    border_.shrink_to_fit();
  }

 private:
  std::vector<Signature> signatures_;
  std::vector<std::size_t> border_;  // border_[i]: longest proper border of s[0..i]
};

// The old rule, for tensors that were all seen: the shortest period that
// divides the count, else the count. The shortest dividing period is the
// shortest period when that divides the count (Fine and Wilf: any other
// dividing period is a multiple of it), and there is none when it does not.
inline std::size_t whole_sequence_length(const PeriodFinder& finder) noexcept {
  const std::size_t n = finder.size(), p = finder.period();
  return p < n && n % p == 0 ? p : n;
}

// The list length of a file whose tensor headers are fed in order, as
// TenListReader and salvage_ten find it. Inferring, it holds signatures
// until the period is settled: once the tensors seen exceed max_tensors plus
// the period, a tensor breaking it would make the period (and so the
// lists) longer than max_tensors, so later tensors are only checked against
// it.
class ListPattern {
 public:
  ListPattern(std::size_t tensors_per_list, std::size_t max_tensors)
      : given_(tensors_per_list), max_tensors_(max_tensors) {}

  [[nodiscard]] bool inferring() const noexcept { return given_ == kInferListLength; }
  // Whether the length is known without seeing the rest of the file.
  [[nodiscard]] bool settled() const noexcept { return !inferring() || settled_; }
  // Feeds the next tensor; returns false if it breaks the settled pattern.
  bool add(Signature s) {
    const std::uint64_t index = seen_++;
    if (!inferring()) return true;
    if (settled_) return same_signature(s, finder_[index % finder_.size()]);
    finder_.add(std::move(s));
    if (finder_.size() - std::min(finder_.period(), max_tensors_) >= max_tensors_) {
      settled_ = true;
      finder_.keep_first(finder_.period());
    }
    return true;
  }
  // The length for reading: given, settled, or (the file ended before it
  // settled) the old rule over every tensor.
  [[nodiscard]] std::size_t length() const noexcept {
    if (!inferring()) return given_;
    return settled() ? finder_.size() : whole_sequence_length(finder_);
  }
  // The length for salvage: given, else the period once it has repeated;
  // an intact file whose tensors never repeat is one list, a damaged one
  // has none known to be whole (0).
  [[nodiscard]] std::size_t salvage_length(bool intact) const noexcept {
    if (!inferring() || settled()) return length();
    if (finder_.period() < finder_.size()) return finder_.period();
    return intact ? finder_.size() : 0;
  }
  // Tensors fed so far.
  [[nodiscard]] std::uint64_t seen() const noexcept { return seen_; }

 private:
  std::size_t given_;
  std::size_t max_tensors_;
  PeriodFinder finder_;  // once settled: the first period's signatures
  bool settled_ = false;
  std::uint64_t seen_ = 0;
};

}  // namespace tensorcom::detail
