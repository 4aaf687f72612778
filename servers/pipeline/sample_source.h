// Where an image server's samples come from: a list of units (webdataset
// shards, or the images of an ImageFolder tree) that the epoch order picks
// from, each read into RawSamples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "raw_sample.h"
#include "tensorcom/formats/image_folder.h"

namespace tensorcom::pipeline {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // How many units there are; the epoch order picks among 0 .. units() - 1.
  [[nodiscard]] virtual std::size_t units() const noexcept = 0;
  // "shards" or "images", for messages.
  [[nodiscard]] virtual const char* unit_name() const noexcept = 0;
  // Unit `unit` as the user named it (a shard, an image file), for messages.
  [[nodiscard]] virtual std::string unit_label(std::size_t unit) const = 0;
  // Reads unit `unit`, passing its samples in order to `take` until it
  // returns false. A sample whose image cannot be used says why in its
  // fields (oversized_image, unreadable); the worker skips and counts it.
  // Returns why the unit ended early (a damaged or missing shard), naming it;
  // nothing if it was read to its end or `take` stopped it. Throws what
  // `take` throws, and std::bad_alloc; the caller ends only this unit.
  // images_later: each image is listed with its size and where it lies
  // (image_offset), unread, for read_image() to read if it is needed (a
  // resumed epoch decodes a tenth of what it lists); an image that cannot
  // be found again so (in a compressed or streamed shard) is read now.
  // abandoned (may be empty): polled while a remote unit's transfer or
  // command waits on its peer; true ends the unit there, as a false from
  // `take` would at the next sample.
  [[nodiscard]] virtual std::optional<std::string> read(std::size_t unit, const std::function<bool(RawSample)>& take,
                                                        bool images_later = false,
                                                        const std::function<bool()>& abandoned = {}) = 0;
  // Whether the unit is read from elsewhere (an http(s) URL, a pipe:
  // command): worth reading ahead (ReadAheadSource).
  [[nodiscard]] virtual bool is_remote(std::size_t /*unit*/) const { return false; }
  // The units the reader reads next, in order, upcoming.front() first: a
  // source may start on them early (ReadAheadSource). images_later: as the
  // reads will be asked.
  virtual void will_read(std::span<const std::size_t> /*upcoming*/, bool /*images_later*/) {}
  // The bytes of an image read() listed with an image_offset. Thread-safe.
  // Throws IoError naming the unit if it cannot be read (changed since).
  [[nodiscard]] virtual ByteBuffer read_image(const RawSample& sample) const = 0;
};

// Webdataset shards (paths, file:PATH, pipe:COMMAND or http(s) URLs): each
// sample's first image member and its "cls" member; images over
// max_image_bytes are passed over unread. `cancelled` (may be empty) is
// polled while a pipe: command or a transfer stalls: true ends the command or
// transfer and the shard, without a retry.
[[nodiscard]] std::unique_ptr<SampleSource> shard_source(std::vector<std::string> shards, std::uint64_t max_image_bytes,
                                                         std::function<bool()> cancelled = {});

// The images of an ImageFolder tree, labelled by their class; files over
// max_image_bytes are passed over unread.
[[nodiscard]] std::unique_ptr<SampleSource> folder_source(formats::ImageFolder folder, std::uint64_t max_image_bytes);

}  // namespace tensorcom::pipeline
