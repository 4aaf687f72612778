#include <sys/resource.h>

#include "tensorcom/programs/program.h"

namespace tensorcom::programs {

void raise_open_file_limit() noexcept {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &limit);  // as far as allowed; the old limit stays otherwise
}

}  // namespace tensorcom::programs
