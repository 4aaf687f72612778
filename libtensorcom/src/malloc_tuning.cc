#include "malloc_tuning.h"

#include <malloc.h>

#include <mutex>

namespace tensorcom::detail {

void keep_large_buffers_mapped() {
  // ZeroMQ mallocs each received message. glibc serves blocks above its mmap
  // threshold (at most 32 MiB) with a fresh mmap and unmaps them on free, so
  // every 38 MB batch would be faulted in page by page: that, not the copy
  // from the socket, would bound throughput. Serving them from the heap and
  // never trimming it keeps the same pages in use from batch to batch.
  // ZeroMQ's I/O thread would get an arena of its own, whose extra heaps
  // glibc unmaps as soon as they are empty (whatever the trim threshold):
  // each batch freed would take its heap with it (measured: page faults were
  // a third of the receiving thread's time). One arena for every thread
  // avoids that; this must happen before ZeroMQ starts its threads.
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_ARENA_MAX, 1);
  });
}

void return_free_memory() { ::malloc_trim(0); }

}  // namespace tensorcom::detail
