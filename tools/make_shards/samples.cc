#include "samples.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <random>
#include <string_view>
#include <system_error>
#include <utility>

#include <iostream>

#include "tensorcom/formats/file_io.h"
#include "tensorcom/formats/image_folder.h"
#include "tensorcom/formats/webdataset.h"
#include "tensorcom/codec/error.h"

namespace fs = std::filesystem;

namespace make_shards {

namespace {

// The member extension for a file: lowercase, without the dot, "jpeg" as "jpg"
// (what webdataset's decoders look for). Empty if the file has none.
[[nodiscard]] std::string member_extension(const fs::path& file) {
  std::string extension = file.extension().string();
  if (!extension.empty()) extension.erase(0, 1);
  extension = tensorcom::formats::lowercase(std::move(extension));
  return extension == "jpeg" ? "jpg" : extension;
}

// Key and extension of a sample read from file, key_path being the file's
// path relative to where keys start.
[[nodiscard]] Sample file_sample(const fs::path& file, const fs::path& key_path, std::int64_t label) {
  Sample sample;
  fs::path stem = key_path.parent_path() / key_path.stem();
  sample.key = tensorcom::formats::webdataset_key(stem.generic_string());
  sample.extension = member_extension(file);
  sample.label = label;
  sample.file = file;
  return sample;
}

[[nodiscard]] std::string trim(std::string_view text) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return std::string(text);
}

// Where a list names a file: key_path relative to the list's folder, or the
// whole path when the file lies outside it (a key must not climb out with "..").
[[nodiscard]] fs::path list_key_path(const fs::path& written, const fs::path& file, const fs::path& list_folder) {
  fs::path relative =
      written.is_absolute() ? written.lexically_relative(fs::absolute(list_folder)) : written.lexically_normal();
  if (relative.empty() || *relative.begin() == "..") relative = fs::absolute(file).lexically_normal().relative_path();
  return relative;
}

// Parses one non-blank, non-comment line of a list file.
[[nodiscard]] Sample parse_list_line(const std::string& line, const fs::path& list, std::size_t line_number,
                                     std::uint64_t offset) {
  auto fail = [&](const std::string& why) {
    return tensorcom::FormatError(list.string() + ":" + std::to_string(line_number) + ": " + why, offset);
  };
  std::size_t split = line.find_last_of(" \t");
  if (split == std::string::npos) throw fail("expected 'PATH LABEL', got '" + line + "'");
  std::string path_text = trim(std::string_view(line).substr(0, split));
  std::string label_text = line.substr(split + 1);
  std::int64_t label = 0;
  auto [end, error] = std::from_chars(label_text.data(), label_text.data() + label_text.size(), label);
  if (path_text.empty() || error != std::errc() || end != label_text.data() + label_text.size())
    throw fail("expected 'PATH LABEL' with an integer LABEL, got '" + line + "'");
  fs::path written(path_text);
  fs::path folder = list.parent_path();
  fs::path file = written.is_absolute() ? written : folder / written;
  Sample sample = file_sample(file, list_key_path(written, file, folder), label);
  if (sample.extension.empty() || sample.extension == "cls")
    throw fail("'" + path_text + "' needs an image file extension");
  return sample;
}

// A uniform integer in [0, bound) from rng, by rejection, so it depends only on
// rng's (standard-defined) output. REQUIRES: bound > 0.
[[nodiscard]] std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound) {
  // Values below threshold would make the low residues more likely.
  const std::uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    std::uint64_t value = rng();
    if (value >= threshold) return value % bound;
  }
}

}  // namespace

FolderSamples scan_image_folder(const fs::path& root) {
  tensorcom::formats::ImageFolder folder = tensorcom::formats::scan_image_folder(root);
  for (const std::string& name : folder.empty_classes)
    std::cerr << "make-shards: class folder " << (root / name).string() << " holds no image (its label is kept)\n";
  FolderSamples out;
  out.samples.reserve(folder.images.size());
  for (const tensorcom::formats::FolderImage& image : folder.images)
    out.samples.push_back(file_sample(image.file, image.relative, image.label));
  out.classes = std::move(folder.classes);
  return out;
}

std::vector<Sample> read_list_file(const fs::path& list) {
  tensorcom::formats::ByteBuffer bytes = tensorcom::formats::read_file(list).bytes;
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::vector<Sample> samples;
  std::size_t number = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = std::min(text.find('\n', start), text.size());
    ++number;
    std::string content = trim(text.substr(start, end - start));
    if (!content.empty() && !content.starts_with('#')) samples.push_back(parse_list_line(content, list, number, start));
    start = end + 1;
  }
  return samples;
}

std::vector<Sample> synthetic_samples(std::uint64_t count, std::int64_t classes) {
  std::vector<Sample> samples(count);
  char key[32];
  for (std::uint64_t i = 0; i < count; ++i) {
    std::snprintf(key, sizeof key, "synthetic/%08llu", static_cast<unsigned long long>(i));
    samples[i].key = key;
    samples[i].extension = "jpg";
    samples[i].label = static_cast<std::int64_t>(i % static_cast<std::uint64_t>(classes));
    samples[i].index = i;
  }
  return samples;
}

void check_unique_keys(const std::vector<Sample>& samples) {
  std::vector<const Sample*> by_key;
  by_key.reserve(samples.size());
  for (const Sample& sample : samples) by_key.push_back(&sample);
  std::sort(by_key.begin(), by_key.end(), [](const Sample* a, const Sample* b) { return a->key < b->key; });
  for (std::size_t i = 1; i < by_key.size(); ++i) {
    if (by_key[i - 1]->key == by_key[i]->key)
      throw tensorcom::ArgumentError(describe(*by_key[i - 1]) + " and " + describe(*by_key[i]) +
                                     " would both have the key '" + by_key[i]->key + "'");
  }
}

void shuffle_samples(std::vector<Sample>& samples, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (std::size_t i = samples.size(); i > 1; --i) std::swap(samples[i - 1], samples[uniform_below(rng, i)]);
}

std::string describe(const Sample& sample) {
  return sample.file.empty() ? "synthetic sample " + std::to_string(sample.index) : sample.file.string();
}

}  // namespace make_shards
