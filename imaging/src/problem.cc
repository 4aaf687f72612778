#include "tensorcom/imaging/problem.h"

namespace tensorcom::imaging {

std::string_view problem_name(Problem problem) noexcept {
  switch (problem) {
    case Problem::kEmpty: return "empty";
    case Problem::kUndecodable: return "undecodable";
    case Problem::kTruncated: return "truncated";
    case Problem::kTooManyPixels: return "too many pixels";
    case Problem::kTooManyScans: return "too many scans";
    case Problem::kNoImage: return "no image";
    case Problem::kTooLarge: return "too large";
    case Problem::kUnreadableFile: return "unreadable file";
    case Problem::kMissingLabel: return "missing label";
    case Problem::kBadLabel: return "bad label";
    case Problem::kLabelOutOfRange: return "label out of range";
  }
  return "unknown problem";
}

}  // namespace tensorcom::imaging
