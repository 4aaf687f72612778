// Benchmark helper: every .jpg/.jpeg member of some tar shards, in memory, so
// that timing sees the work only.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace bench {

// The JPEGs of shards argv[first..argc); exits naming a shard it cannot open.
template <class Byte>
std::vector<std::vector<Byte>> load_jpegs(const char* program, int first, int argc, char** argv) {
  std::vector<std::vector<Byte>> jpegs;
  for (int i = first; i < argc; ++i) {
    std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
    archive_read_support_filter_all(a.get());
    archive_read_support_format_tar(a.get());
    if (archive_read_open_filename(a.get(), argv[i], 1 << 20) != ARCHIVE_OK) {
      std::fprintf(stderr, "%s: cannot open %s\n", program, argv[i]);
      std::exit(1);
    }
    archive_entry* e;
    while (archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
      std::string name = archive_entry_pathname(e);
      if (!name.ends_with(".jpg") && !name.ends_with(".jpeg")) continue;
      std::vector<Byte> bytes(static_cast<std::size_t>(archive_entry_size(e)));
      if (archive_read_data(a.get(), bytes.data(), bytes.size()) != static_cast<la_ssize_t>(bytes.size())) break;
      jpegs.push_back(std::move(bytes));
    }
  }
  return jpegs;
}

}  // namespace bench
