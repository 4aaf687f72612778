// The naming rules of webdataset shards and ImageFolder trees, written once
// for every reader and writer of them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tensorcom::formats {

// A tar member's path split as webdataset splits it (its regular expression
// `^((?:.*/|)[^.]+)[.]([^/]*)$`): the key is the path up to the first dot of
// the base name, the extension the rest, lowercased as webdataset's
// group_by_keys does. "a/b.c/n01.tar.JPG" -> {"a/b.c/n01", "tar.jpg"}.
struct MemberName {
  std::string key;
  std::string extension;
};

// Returns nothing for a path webdataset passes over (a base name without a
// dot, or starting with one) and for a base name whose first dot ends it
// ("n." or "d/n."): an empty extension names no field of a sample.
[[nodiscard]] std::optional<MemberName> split_member_name(std::string_view path);

// Returns key with every '.' after its last '/' replaced by '_', so that a
// file's stem ("img.1") can serve as a key without being cut at its dot.
[[nodiscard]] std::string webdataset_key(std::string key);

// Whether a file or member extension (without the dot, any case) names an
// image: torchvision's IMG_EXTENSIONS (jpg jpeg png ppm bmp pgm tif tiff
// webp). A shard member's whole extension must be one of these ("x.jpg" is
// not "jpg"), as in webdataset's to_tuple.
[[nodiscard]] bool is_image_extension(std::string_view extension) noexcept;

// ASCII lowercase.
[[nodiscard]] std::string lowercase(std::string text);

}  // namespace tensorcom::formats
