// ImageFolder trees (ROOT/CLASS/.../NAME.EXT) read with torchvision's rules,
// so that a model trained from tensorcom sees the labels torchvision's
// ImageFolder would give: the classes are every folder directly under ROOT
// (hidden ones included, as torchvision's find_classes lists them), sorted by
// name; a class's images are the files below its folder, at any depth and
// through symbolic links, whose extension is_image_extension accepts (hidden
// files included), ordered folder by folder and then by name, as
// torchvision's sorted(os.walk(...)) lists them. Names compare as bytes,
// which for UTF-8 is Python's code-point order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tensorcom::formats {

struct FolderImage {
  std::filesystem::path file;      // ROOT/CLASS/.../NAME.EXT
  std::filesystem::path relative;  // CLASS/.../NAME.EXT
  std::int32_t label = 0;          // index of CLASS in ImageFolder::classes
};

struct ImageFolder {
  std::vector<std::string> classes;        // sorted; label i is classes[i]
  std::vector<FolderImage> images;         // by class, then as listed above
  std::vector<std::string> empty_classes;  // classes without an image (torchvision refuses such trees)
};

// Throws IoError naming the folder that cannot be listed. A root without
// class folders gives no classes and no images.
[[nodiscard]] ImageFolder scan_image_folder(const std::filesystem::path& root);

}  // namespace tensorcom::formats
