#include "parallel_chunks.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

namespace tensorcom {

void run_in_chunks(std::size_t n, int threads, const std::function<void(std::size_t, std::size_t)>& body) {
  const std::size_t chunks = std::min<std::size_t>(n, static_cast<std::size_t>(std::max(threads, 1)));
  if (chunks <= 1) {
    if (n > 0) body(0, n);
    return;
  }
  std::vector<std::exception_ptr> errors(chunks);
  auto run = [&](std::size_t c) {
    try {
      body(n * c / chunks, n * (c + 1) / chunks);
    } catch (...) {
      errors[c] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> helpers;
    helpers.reserve(chunks - 1);
    for (std::size_t c = 1; c < chunks; ++c) helpers.emplace_back(run, c);
    run(0);
  }  // the helpers join here
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace tensorcom
