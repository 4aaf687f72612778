// Why a sample cannot be used, as a type: servers count skipped samples by
// Problem, and their metrics' `reason` labels are problem_name()s, so
// rewording an error message never moves a metrics series.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "tensorcom/codec/error.h"

namespace tensorcom::imaging {

enum class Problem : std::uint8_t {
  // The image itself (what this library reports):
  kEmpty,          // an image member of zero bytes
  kUndecodable,    // not an image of a known format, or damaged beyond decoding
  kTruncated,      // the encoded data ends before the image does
  kTooManyPixels,  // dimensions beyond AugmentOptions::max_pixels
  kTooManyScans,   // a progressive JPEG with more scans than decoding is allowed
  // The sample around it (what the servers report):
  kNoImage,          // a sample without an image member
  kTooLarge,         // an image member over the server's byte limit
  kUnreadableFile,   // an ImageFolder file that could not be read
  kMissingLabel,     // no .cls member
  kBadLabel,         // a .cls member that is not a decimal integer
  kLabelOutOfRange,  // a label outside 0..classes-1
};

// Every problem, in declaration order: metrics export each at 0 from the start.
inline constexpr std::array kAllProblems = {
    Problem::kEmpty,        Problem::kUndecodable, Problem::kTruncated,       Problem::kTooManyPixels,
    Problem::kTooManyScans, Problem::kNoImage,     Problem::kTooLarge,        Problem::kUnreadableFile,
    Problem::kMissingLabel, Problem::kBadLabel,    Problem::kLabelOutOfRange,
};

// Returns: the problem in words ("undecodable", "too many pixels", ...):
// the servers' skip summaries and metrics labels.
[[nodiscard]] std::string_view problem_name(Problem problem) noexcept;

// An image that cannot be decoded or transformed. what() is
// "<problem name>: <detail>"; problem() is what to count it as.
class ImageError : public Error {
 public:
  ImageError(Problem problem, const std::string& detail)
      : Error(std::string(problem_name(problem)) + ": " + detail), problem_(problem) {}
  [[nodiscard]] Problem problem() const noexcept { return problem_; }

 private:
  Problem problem_;
};

}  // namespace tensorcom::imaging
