#include <string>

#include "tensorcom/programs/program.h"

namespace tensorcom::programs {

std::chrono::milliseconds seconds_option(const char* name, double seconds) {
  constexpr double kWeek = 7 * 24 * 3600.0;
  if (!(seconds >= 0 && seconds <= kWeek)) {
    throw ArgumentError(std::string(name) + " " + std::to_string(seconds) + ": expected 0 to " +
                        std::to_string(static_cast<int>(kWeek)) + " seconds");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

}  // namespace tensorcom::programs
