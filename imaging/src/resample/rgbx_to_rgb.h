// Internal: the last step of the JPEG path, from the resized RGBX crop to the
// batch's RGB pixels, mirrored or not, in one pass.
#pragma once

#include <cstdint>

namespace tensorcom::imaging {

// Drops the padding byte of width x height RGBX pixels (rows 4*width bytes
// apart) and writes RGB rows 3*width bytes apart to out, each row mirrored
// if flip. Uses SSSE3 where the CPU has it.
void rgbx_to_rgb(const std::uint8_t* rgbx, int width, int height, bool flip, std::uint8_t* out);

// The portable version, for tests and CPUs without SSSE3.
void rgbx_to_rgb_portable(const std::uint8_t* rgbx, int width, int height, bool flip, std::uint8_t* out);

}  // namespace tensorcom::imaging
