#include "image_rewriter.h"

#include "tensorcom/imaging/format.h"
#include "tensorcom/imaging/restart_markers.h"

namespace make_shards {

using tensorcom::formats::ByteBuffer;
namespace imaging = tensorcom::imaging;

ImageRewriter::ImageRewriter(std::optional<imaging::ReduceOptions> reduce, bool restart_markers)
    : reduce_(reduce), restart_markers_(restart_markers) {
  if (reduce_) reduce_->restart_markers = restart_markers;
  if (reduce_) give_back(borrow());  // refuses bad options now, not in a job thread
}

std::unique_ptr<imaging::ImageReducer> ImageRewriter::borrow() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      auto reducer = std::move(idle_.back());
      idle_.pop_back();
      return reducer;
    }
  }
  return std::make_unique<imaging::ImageReducer>(*reduce_);
}

void ImageRewriter::give_back(std::unique_ptr<imaging::ImageReducer> reducer) {
  std::lock_guard lock(mutex_);
  idle_.push_back(std::move(reducer));
}

std::optional<std::string> ImageRewriter::rewrite(ByteBuffer& image) {
  if (imaging::sniff_format(image) != imaging::ImageFormat::kJpeg) return std::nullopt;
  if (reduce_) {
    const auto start = std::chrono::steady_clock::now();
    auto reducer = borrow();
    std::optional<ByteBuffer> reduced;
    try {
      reduced = reducer->reduce(image);
    } catch (const tensorcom::Error& e) {
      give_back(std::move(reducer));
      return e.what();
    }
    give_back(std::move(reducer));
    if (reduced) {
      nanoseconds_ +=
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
      ++images_;
      bytes_in_ += image.size();
      bytes_out_ += reduced->size();
      image = std::move(*reduced);
      return std::nullopt;  // restart markers, when asked, were written with it
    }
  }
  return restart_markers_ ? imaging::add_restart_markers(image) : std::nullopt;
}

std::vector<std::optional<std::string>> ImageRewriter::rewrite(std::vector<tensorcom::formats::ShardMember>& members) {
  std::vector<std::optional<std::string>> unchanged(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) unchanged[i] = rewrite(members[i].data);
  return unchanged;
}

ImageRewriter::Reductions ImageRewriter::reductions() const {
  return {images_.load(), bytes_in_.load(), bytes_out_.load(), static_cast<double>(nanoseconds_.load()) * 1e-9};
}

}  // namespace make_shards
