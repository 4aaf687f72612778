#include "size_schedule.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tensorcom/codec/error.h"
#include "tensorcom/formats/printable.h"

namespace tensorcom::pipeline {

namespace {

// Epochs past any real run; it keeps the ramp's arithmetic exact in doubles.
constexpr std::uint64_t kMostEpoch = 1000000;

[[noreturn]] void refuse(std::string_view text, const std::string& why) {
  throw ArgumentError("--size-schedule '" + formats::printable(text) + "': " + why);
}

std::vector<std::uint64_t> whole_numbers(std::string_view text) {
  std::vector<std::uint64_t> out;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string_view item = text.substr(begin, end - begin);
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string_view::npos) {
      refuse(text, "expected START,END,START_EPOCH,END_EPOCH, four whole numbers (e.g. 160,192,0,10)");
    }
    out.push_back(std::stoull(std::string(item)));
    if (end == text.size()) return out;
    begin = end + 1;
  }
}

}  // namespace

int SizeSchedule::size_at(std::uint64_t epoch) const noexcept {
  if (epoch <= start_epoch) return start_size;
  if (epoch >= end_epoch) return end_size;
  // np.interp's arithmetic, then round half to even (nearbyint in the
  // default rounding mode), as np.round does.
  const double slope = double(end_size - start_size) / double(end_epoch - start_epoch);
  const double size = slope * double(epoch - start_epoch) + start_size;
  return static_cast<int>(std::nearbyint(size / 32)) * 32;
}

// The ramp never falls, so its extremes are its ends and the epochs next to them.
int SizeSchedule::largest() const noexcept {
  return std::max({start_size, end_size, end_epoch > 0 ? size_at(end_epoch - 1) : 0});
}

int SizeSchedule::smallest() const noexcept { return std::min({start_size, end_size, size_at(start_epoch + 1)}); }

SizeSchedule parse_size_schedule(std::string_view text, int most_size) {
  const std::vector<std::uint64_t> v = whole_numbers(text);
  if (v.size() != 4) refuse(text, "expected START,END,START_EPOCH,END_EPOCH, four whole numbers (e.g. 160,192,0,10)");
  const auto most = static_cast<std::uint64_t>(most_size);
  if (v[0] < 1 || v[0] > most || v[1] < 1 || v[1] > most) {
    refuse(text, "sizes must be 1 to " + std::to_string(most) + ", as --size");
  }
  if (v[0] > v[1])
    refuse(text, "the start size is larger than the end size (sizes only grow, as FFCV's min_res <= max_res)");
  if (v[2] > v[3]) refuse(text, "the end epoch is before the start epoch");
  if (v[3] > kMostEpoch) refuse(text, "epochs must be at most " + std::to_string(kMostEpoch));
  const SizeSchedule schedule{static_cast<int>(v[0]), static_cast<int>(v[1]), v[2], v[3]};
  if (schedule.largest() > most_size)
    refuse(text, "the ramp rounds above " + std::to_string(most) + " (--size's bound)");
  if (schedule.smallest() < 1) {
    refuse(text, "the ramp rounds to size 0 at epoch " + std::to_string(v[2] + 1) +
                     " (sizes between the ends are multiples of 32)");
  }
  return schedule;
}

}  // namespace tensorcom::pipeline
