// Interleaved pixels (HWC: R, G, B of one pixel side by side, as decoders
// and resamplers write them) to planes (CHW: all of R, then G, then B, as a
// torch batch of images is laid out). torch copies a permuted HWC view
// element by element; this is one pass at memory speed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensorcom::imaging {

// pixels: count pixels of channels bytes each, contiguous. Writes plane k
// (byte k of every pixel) to planes + k * count. Uses SSSE3 for 3 channels
// where the CPU has it.
void interleaved_to_planar(const std::uint8_t* pixels, std::size_t count, int channels, std::uint8_t* planes);

// The portable version, for tests and CPUs without SSSE3.
void interleaved_to_planar_portable(const std::uint8_t* pixels, std::size_t count, int channels, std::uint8_t* planes);

}  // namespace tensorcom::imaging
