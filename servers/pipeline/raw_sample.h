// A sample as read from a shard or folder, before decoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tensorcom::pipeline {

struct RawSample {
  std::string key;                   // webdataset key: member path up to the first dot of its base name
  std::string shard;                 // the shard (or folder) it came from, as named by the user
  std::string image_extension;       // "jpg", "jpeg", "png" or "ppm"; empty if the sample has no image
  std::vector<std::byte> image;      // the encoded image
  std::optional<std::string> label;  // text of the "cls" member, if any
  std::optional<std::int32_t> known_label;  // a label known without text (ImageFolder)
  std::uint64_t sequence = 0;        // position in the served stream; seeds its augmentation
};

}  // namespace tensorcom::pipeline
