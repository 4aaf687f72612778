// Benchmark helper: every .jpg/.jpeg member of some tar shards, in memory, so
// that timing sees the work only.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tensorcom/codec/error.h"
#include "tensorcom/formats/shard_reader.h"

namespace bench {

// The JPEGs of shards argv[first..argc); exits naming a shard it cannot open.
template <class Byte>
std::vector<std::vector<Byte>> load_jpegs(const char* program, int first, int argc, char** argv) {
  std::vector<std::vector<Byte>> jpegs;
  tensorcom::formats::ShardReaderOptions options;
  options.wanted = [](const tensorcom::formats::ShardSample&, std::string_view extension) {
    return extension == "jpg" || extension == "jpeg";
  };
  for (int i = first; i < argc; ++i) {
    try {
      tensorcom::formats::ShardReader reader(argv[i], options);
      while (auto sample = reader.next()) {
        for (const tensorcom::formats::ShardMember& member : sample->members) {
          const auto* bytes = reinterpret_cast<const Byte*>(member.data.data());
          jpegs.emplace_back(bytes, bytes + member.data.size());
        }
      }
    } catch (const tensorcom::Error& e) {
      std::fprintf(stderr, "%s: %s\n", program, e.what());
      std::exit(1);
    }
  }
  return jpegs;
}

}  // namespace bench
