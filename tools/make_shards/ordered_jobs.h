// The slow part of packing (reading, generating or rewriting images) on
// several threads, with output byte-identical to a one-thread run: items are
// read in order, prepared in parallel a chunk at a time, and written in order.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

namespace make_shards {

// read() gives the next item, or nothing at the end; prepare(item) runs on
// any of `jobs` threads; write(item) runs on the calling thread, in read
// order. An exception from read() or prepare() is rethrown once every item
// before it has been written, as a one-thread run would have done.
template <class Item, class Read, class Prepare, class Write>
void run_in_order(unsigned jobs, Read read, Prepare prepare, Write write) {
  jobs = std::max(jobs, 1u);
  // Enough items per thread that the wait for the slowest one at the end of
  // a chunk costs little; few enough that memory stays small.
  const std::size_t chunk = 16 * static_cast<std::size_t>(jobs);
  std::vector<Item> items;
  std::vector<std::exception_ptr> failures;
  std::exception_ptr read_failure;
  while (!read_failure) {
    items.clear();
    try {
      while (items.size() < chunk) {
        std::optional<Item> item = read();
        if (!item) break;
        items.push_back(std::move(*item));
      }
    } catch (...) {
      read_failure = std::current_exception();
    }
    if (items.empty() && !read_failure) return;
    failures.assign(items.size(), nullptr);
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < items.size();) {
        try {
          prepare(items[i]);
        } catch (...) {
          failures[i] = std::current_exception();
        }
      }
    };
    {
      std::vector<std::jthread> helpers;
      for (std::size_t t = 1; t < jobs && t < items.size(); ++t) helpers.emplace_back(work);
      work();
    }  // helpers joined
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (failures[i]) std::rethrow_exception(failures[i]);
      write(items[i]);
    }
    if (items.size() < chunk && !read_failure) return;
  }
  std::rethrow_exception(read_failure);
}

}  // namespace make_shards
