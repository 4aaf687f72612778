#include "tensorcom/codec/error.h"

#include <cstring>

namespace tensorcom {

std::string_view format_error_kind_name(FormatErrorKind kind) noexcept {
  switch (kind) {
    case FormatErrorKind::kBadHeader: return "bad header";
    case FormatErrorKind::kDataPayload: return "data payload";
    case FormatErrorKind::kOddFrameCount: return "odd frame count";
    case FormatErrorKind::kTooManyTensors: return "too many tensors";
    case FormatErrorKind::kChunkPrefix: return "chunk prefix";
    case FormatErrorKind::kBadMagic: return "bad magic";
    case FormatErrorKind::kChunkLength: return "chunk length";
    case FormatErrorKind::kOddChunkCount: return "odd chunk count";
    case FormatErrorKind::kTooLarge: return "too large";
    case FormatErrorKind::kMetadata: return "metadata";
    case FormatErrorKind::kListLength: return "list length";
    case FormatErrorKind::kCompressedImages: return "compressed images";
    case FormatErrorKind::kOther: break;
  }
  return "other";
}

IoError::IoError(const std::string& what, int code) : Error(what + ": " + std::strerror(code)), code_(code) {}

}  // namespace tensorcom
