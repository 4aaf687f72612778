// Output arrays of the imaging transforms, in memory that earlier outputs
// freed. A DataLoader worker holds a batch of outputs until they are
// collated, then frees them all: glibc returns blocks this large to the
// OS, and the next batch's fresh ones are faulted in page by page, which
// costs as much as a decode where page faults are dear (virtual machines).
#pragma once

#include <cstddef>
#include <cstdint>

#include "bindings.h"

namespace tensorcom::python {

// A writable C-contiguous uint8 (height, width, 3) array over a pooled
// block; the block goes back to the pool when the array is freed.
py::array_t<std::uint8_t> pooled_rgb_array(std::size_t height, std::size_t width);

// Bytes of freed blocks the pool keeps for reuse, at most kMaxIdleBytes.
inline constexpr std::size_t kMaxIdleBytes = std::size_t{128} << 20;
std::size_t pooled_idle_bytes();

}  // namespace tensorcom::python
