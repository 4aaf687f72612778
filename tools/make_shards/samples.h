// The samples to pack and the order to pack them in: from an ImageFolder
// tree, a list file, or synthetic. A sample becomes the tar members
// KEY.EXTENSION (the image) and KEY.cls (the label in ASCII decimal).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace make_shards {

struct Sample {
  std::string key;             // webdataset key: no '.' after its last '/'
  std::string extension;       // of the image member: lowercase, "jpeg" written "jpg"
  std::int64_t label = 0;      // class index
  std::filesystem::path file;  // the image; empty for a synthetic sample
  std::uint64_t index = 0;     // which synthetic sample, when file is empty
};

// The images of an ImageFolder tree and its class names (label i is
// classes[i]).
struct FolderSamples {
  std::vector<Sample> samples;
  std::vector<std::string> classes;
};

// Returns the images of an ImageFolder tree, read by torchvision's rules
// (tensorcom/formats/image_folder.h), keyed CLASS/.../NAME (dots in NAME
// turned into '_'), with a warning for each class folder without images.
// Throws IoError when a folder cannot be listed.
[[nodiscard]] FolderSamples scan_image_folder(const std::filesystem::path& root);

// Returns the samples of a list file, in its order: one "PATH LABEL" a line
// (PATH may hold spaces; LABEL is an integer), blank lines and lines starting
// with '#' skipped. A relative PATH is relative to the list's folder; the key
// is PATH without extension relative to that folder (for a file outside it, the
// absolute path without the leading '/'). Throws FormatError naming the file
// and line number of a malformed line, IoError if the list cannot be read.
[[nodiscard]] std::vector<Sample> read_list_file(const std::filesystem::path& list);

// Returns count synthetic samples: keys synthetic/00000000, synthetic/00000001...,
// extension jpg, label index % classes (so every class is as frequent).
// REQUIRES: classes > 0.
[[nodiscard]] std::vector<Sample> synthetic_samples(std::uint64_t count, std::int64_t classes);

// Throws ArgumentError naming both sources if two samples share a key: their
// members would merge into one webdataset sample.
void check_unique_keys(const std::vector<Sample>& samples);

// Reorders samples by a Fisher-Yates shuffle driven by std::mt19937_64(seed),
// whose output, unlike std::shuffle's, the standard fixes: the order is the
// same on every platform.
void shuffle_samples(std::vector<Sample>& samples, std::uint64_t seed);

// Describes where a sample comes from, for messages.
[[nodiscard]] std::string describe(const Sample& sample);

}  // namespace make_shards
