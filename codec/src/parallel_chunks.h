// Internal: a loop over [0, n) split into contiguous chunks run on threads
// of their own, for work a batch at a time (its images) where starting a
// thread costs little against the chunk.
#pragma once

#include <cstddef>
#include <functional>

namespace tensorcom {

// Runs body(begin, end) over [0, n) in at most `threads` chunks, the calling
// thread taking the first; returns when all are done, rethrowing the
// exception of the lowest chunk that threw. threads < 1 counts as 1.
void run_in_chunks(std::size_t n, int threads, const std::function<void(std::size_t, std::size_t)>& body);

}  // namespace tensorcom
