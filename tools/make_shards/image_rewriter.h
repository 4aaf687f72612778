// What make-shards does to an image before packing it: --max-side's
// reduced-resolution copy (imaging/reduce.h), then --restart-markers'
// lossless rewrite (written directly by the reduction when there was one).
// Thread-safe: the job threads share one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tensorcom/formats/file_io.h"
#include "tensorcom/formats/shard_reader.h"
#include "tensorcom/imaging/reduce.h"

namespace make_shards {

class ImageRewriter {
 public:
  // reduce: --max-side's options, or nothing for no reduction.
  ImageRewriter(std::optional<tensorcom::imaging::ReduceOptions> reduce, bool restart_markers);

  // Rewrites a JPEG in place (other formats are left as they are; the
  // bytes tell the format). Returns why it was left as it was, when it was
  // asked to change and could not be read.
  std::optional<std::string> rewrite(tensorcom::formats::ByteBuffer& image);
  // The same for each member of a sample read from a shard.
  [[nodiscard]] std::vector<std::optional<std::string>> rewrite(std::vector<tensorcom::formats::ShardMember>& members);

  [[nodiscard]] bool changes_anything() const noexcept { return reduce_.has_value() || restart_markers_; }

  // --max-side's work so far: images reduced, their bytes before and
  // after, and the seconds the job threads spent reducing them.
  struct Reductions {
    std::uint64_t images = 0;
    std::uint64_t bytes_in = 0;
    std::uint64_t bytes_out = 0;
    double seconds = 0;
  };
  [[nodiscard]] Reductions reductions() const;

 private:
  std::unique_ptr<tensorcom::imaging::ImageReducer> borrow();
  void give_back(std::unique_ptr<tensorcom::imaging::ImageReducer> reducer);

  std::optional<tensorcom::imaging::ReduceOptions> reduce_;
  bool restart_markers_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<tensorcom::imaging::ImageReducer>> idle_;  // one a thread, reused
  std::atomic<std::uint64_t> images_{0}, bytes_in_{0}, bytes_out_{0};
  std::atomic<std::int64_t> nanoseconds_{0};
};

}  // namespace make_shards
