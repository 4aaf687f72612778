#include "tensorcom/formats/image_folder.h"

#include <algorithm>
#include <set>
#include <system_error>
#include <utility>

#include "tensorcom/codec/error.h"
#include "tensorcom/formats/webdataset.h"

namespace fs = std::filesystem;

namespace tensorcom::formats {

namespace {

// The entries of folder, sorted by name. Throws IoError naming the folder.
std::vector<fs::directory_entry> sorted_entries(const fs::path& folder) {
  std::error_code error;
  fs::directory_iterator it(folder, error);
  std::vector<fs::directory_entry> entries;
  for (; !error && it != fs::directory_iterator(); it.increment(error)) entries.push_back(*it);
  if (error) throw IoError("cannot list " + folder.string(), error.value());
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.path().filename().native() < b.path().filename().native(); });
  return entries;
}

bool is_image_file(const fs::path& file) {
  std::string extension = file.extension().string();
  return extension.size() > 1 && is_image_extension(std::string_view(extension).substr(1));
}

// Appends the images below folder to files, as paths relative to
// class_folder. Follows symbolic links, as os.walk(followlinks=True) does,
// but enters each real folder once, so that a link loop ends.
void collect_images(const fs::path& class_folder, const fs::path& folder, std::set<fs::path>& entered,
                    std::vector<fs::path>& files) {
  std::error_code error;
  fs::path real = fs::canonical(folder, error);
  if (error || !entered.insert(real).second) return;
  for (const fs::directory_entry& entry : sorted_entries(folder)) {
    if (entry.is_directory(error)) {
      collect_images(class_folder, entry.path(), entered, files);
    } else if (entry.is_regular_file(error) && is_image_file(entry.path())) {
      files.push_back(entry.path().lexically_relative(class_folder));
    }
  }
}

}  // namespace

ImageFolder scan_image_folder(const fs::path& root) {
  ImageFolder folder;
  for (const fs::directory_entry& entry : sorted_entries(root)) {
    std::error_code error;
    if (entry.is_directory(error)) folder.classes.push_back(entry.path().filename().string());
  }
  for (std::size_t label = 0; label < folder.classes.size(); ++label) {
    const fs::path class_folder = root / folder.classes[label];
    std::set<fs::path> entered;
    std::vector<fs::path> files;
    collect_images(class_folder, class_folder, entered, files);
    // Folder by folder, then by name: the order of sorted(os.walk(...)).
    std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
      return std::pair(a.parent_path().native(), a.filename().native()) <
             std::pair(b.parent_path().native(), b.filename().native());
    });
    if (files.empty()) folder.empty_classes.push_back(folder.classes[label]);
    for (fs::path& file : files) {
      folder.images.push_back({class_folder / file, folder.classes[label] / file, static_cast<std::int32_t>(label)});
    }
  }
  return folder;
}

}  // namespace tensorcom::formats
