#include "tensorcom/formats/webdataset.h"

#include <algorithm>
#include <array>

namespace tensorcom::formats {

namespace {

// torchvision.datasets.folder.IMG_EXTENSIONS, without the dots.
constexpr std::array<std::string_view, 9> kImageExtensions = {"jpg", "jpeg", "png",  "ppm", "bmp",
                                                              "pgm", "tif",  "tiff", "webp"};

}  // namespace

std::string lowercase(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

std::optional<MemberName> split_member_name(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  const std::size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  const std::size_t dot = path.find('.', base);
  // Nothing after the dot: webdataset would file the member under an empty
  // extension, which no field of a sample can name.
  if (dot == std::string_view::npos || dot == base || dot + 1 == path.size()) return std::nullopt;
  return MemberName{std::string(path.substr(0, dot)), lowercase(std::string(path.substr(dot + 1)))};
}

std::string webdataset_key(std::string key) {
  const std::size_t slash = key.rfind('/');
  std::replace(key.begin() + static_cast<std::ptrdiff_t>(slash == std::string::npos ? 0 : slash + 1), key.end(), '.',
               '_');
  return key;
}

bool is_image_extension(std::string_view extension) noexcept {
  if (extension.size() > 4) return false;
  char lower[4];
  for (std::size_t i = 0; i < extension.size(); ++i) {
    char c = extension[i];
    lower[i] = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  std::string_view folded(lower, extension.size());
  return std::find(kImageExtensions.begin(), kImageExtensions.end(), folded) != kImageExtensions.end();
}

}  // namespace tensorcom::formats
