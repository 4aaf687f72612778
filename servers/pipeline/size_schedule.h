// Resolution by epoch (progressive resizing), as FFCV's ImageNet recipes
// grow it: min_res, max_res, start_ramp and end_ramp there are start_size,
// end_size, start_epoch and end_epoch here. The server owns the schedule
// because the decode and resize are its cost, and a PUB server cannot make
// a size per trainer. Epochs count from 0, as the server counts them.
#pragma once

#include <cstdint>
#include <string_view>

namespace tensorcom::pipeline {

struct SizeSchedule {
  int start_size = 160;           // up to and including start_epoch
  int end_size = 192;             // from end_epoch on
  std::uint64_t start_epoch = 0;  // the ramp's first epoch
  std::uint64_t end_epoch = 0;    // the first epoch at end_size

  // The output height and width of `epoch`'s images: start_size up to
  // start_epoch, end_size from end_epoch, and between them the linear ramp
  // rounded to the nearest multiple of 32, ties to even (FFCV's
  // get_resolution: np.interp, then np.round(x / 32) * 32).
  [[nodiscard]] int size_at(std::uint64_t epoch) const noexcept;
  // The largest size of any epoch (what batch buffers must hold).
  [[nodiscard]] int largest() const noexcept;
  // The smallest size of any epoch (rounding can take the ramp below start_size).
  [[nodiscard]] int smallest() const noexcept;
};

// Parses --size-schedule's "START,END,START_EPOCH,END_EPOCH". Throws
// ArgumentError, its message naming the option, for anything but four whole
// numbers with every epoch's size in 1..most_size, START <= END (sizes only
// grow, as FFCV asserts) and START_EPOCH <= END_EPOCH.
[[nodiscard]] SizeSchedule parse_size_schedule(std::string_view text, int most_size);

}  // namespace tensorcom::pipeline
