// A SampleSource made in memory: `units` units of `per_unit` samples, keyed
// "U/I", labelled U * 100 + I, each image `image_bytes` bytes (or the
// encoded image the test gives it). Counts what was read, so that tests can
// bound what the reader holds.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sample_source.h"
#include "tensorcom/codec/error.h"

namespace tensorcom::pipeline::testing {

class FakeSource final : public SampleSource {
 public:
  FakeSource(std::size_t units, std::size_t per_unit, std::size_t image_bytes = 16)
      : units_(units), per_unit_(per_unit), image_bytes_(image_bytes) {}

  // The image of the sample with this key (default: image_bytes of its label).
  void set_image(const std::string& key, ByteBuffer image) { images_[key] = std::move(image); }
  // Reading this unit throws after `after` samples.
  void fail_unit(std::size_t unit, std::size_t after) { failing_[unit] = after; }

  [[nodiscard]] std::size_t units() const noexcept override { return units_; }
  [[nodiscard]] const char* unit_name() const noexcept override { return "shards"; }
  [[nodiscard]] std::string unit_label(std::size_t unit) const override { return "unit-" + std::to_string(unit); }

  std::optional<std::string> read(std::size_t unit, const std::function<bool(RawSample)>& take, bool images_later,
                                  const std::function<bool()>& /*abandoned*/) override {
    for (std::size_t i = 0; i < per_unit_; ++i) {
      if (failing_.count(unit) && i == failing_.at(unit)) throw IoError("unit-" + std::to_string(unit) + " broke", EIO);
      RawSample sample;
      sample.key = std::to_string(unit) + "/" + std::to_string(i);
      sample.shard = unit_label(unit);
      sample.known_label = static_cast<std::int32_t>(unit * 100 + i);
      const ByteBuffer image = image_of(sample.key);
      sample.image_bytes = image.size();
      if (images_later) {
        sample.image_offset = i;
      } else {
        sample.image = image;
      }
      ++read_;
      if (!take(std::move(sample))) return std::nullopt;
    }
    return std::nullopt;
  }

  [[nodiscard]] ByteBuffer read_image(const RawSample& sample) const override {
    ++read_later_;
    return image_of(sample.key);
  }

  [[nodiscard]] std::uint64_t samples_read() const noexcept { return read_; }
  [[nodiscard]] std::uint64_t images_read_later() const noexcept { return read_later_; }

 private:
  [[nodiscard]] ByteBuffer image_of(const std::string& key) const {
    if (const auto found = images_.find(key); found != images_.end()) return found->second;
    return ByteBuffer(image_bytes_, std::byte{7});
  }

  std::size_t units_;
  std::size_t per_unit_;
  std::size_t image_bytes_;
  std::map<std::string, ByteBuffer> images_;
  std::map<std::size_t, std::size_t> failing_;
  std::atomic<std::uint64_t> read_{0};
  mutable std::atomic<std::uint64_t> read_later_{0};
};

}  // namespace tensorcom::pipeline::testing
