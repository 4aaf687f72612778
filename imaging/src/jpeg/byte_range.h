// Internal: where a restart interval's entropy-coded bytes lie, shared by
// the slicer that finds them and the decoders that read them.
#pragma once

#include <cstdint>

namespace tensorcom::imaging {

// [begin, end) of a JPEG's bytes (or of a slice's unstuffed copy), without
// the interval's marker.
struct ByteRange {
  std::uint32_t begin = 0;
  std::uint32_t end = 0;
};

}  // namespace tensorcom::imaging
