// read-shard: reads one shard through ShardReader and prints what it gave,
// for the http(s) shard tests: a line per sample ("sample KEY EXT:SIZE:SUM
// ...", SUM the member's bytes weighted by their position, in hex),
// then "end" or "error: WHY"; on stderr, its peak resident memory
// ("peak-kib N", from /proc/self/status: not counting what a parent held
// before exec, as getrusage does). Exit status: 0 at a clean end, 1 if the shard
// ended with an error, 2 if it could not be opened or the usage is wrong.
//   read-shard [--attempts N] [--connect-ms N] [--stall-ms N] [--retry-ms N] [--max-redirects N]
//              [--min-rate BYTES_PER_S] [--rate-window-ms N] [--max-transfer-ms N] SHARD
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include "tensorcom/codec/error.h"
#include "tensorcom/formats/printable.h"
#include "tensorcom/formats/shard_reader.h"

using namespace tensorcom;
using namespace tensorcom::formats;

namespace {

// Sets the option named `flag` from `value`; false if there is no such option.
bool set_option(std::string_view flag, long value, HttpShardOptions& http) {
  if (flag == "--attempts") {
    http.attempts = static_cast<int>(value);
  } else if (flag == "--connect-ms") {
    http.connect_timeout = std::chrono::milliseconds(value);
  } else if (flag == "--stall-ms") {
    http.stall_timeout = std::chrono::milliseconds(value);
  } else if (flag == "--retry-ms") {
    http.first_retry_delay = std::chrono::milliseconds(value);
  } else if (flag == "--max-redirects") {
    http.max_redirects = static_cast<int>(value);
  } else if (flag == "--min-rate") {
    http.min_bytes_per_second = static_cast<std::uint64_t>(value);
  } else if (flag == "--rate-window-ms") {
    http.rate_window = std::chrono::milliseconds(value);
  } else if (flag == "--max-transfer-ms") {
    http.max_transfer_time = std::chrono::milliseconds(value);
  } else {
    return false;
  }
  return true;
}

// A member's bytes in a few digits, sum of byte * (its index + 1) modulo
// 2^64: enough to see a chunk lost, repeated or moved between curl and
// libarchive, and quick to compute in numpy.
std::uint64_t weighted_sum(const ByteBuffer& bytes) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) sum += static_cast<std::uint64_t>(bytes[i]) * (i + 1);
  return sum;
}

void print_sample(const ShardSample& sample) {
  std::cout << "sample " << printable(sample.key);
  for (const ShardMember& member : sample.members) {
    std::cout << ' ' << member.extension << ':' << member.size << ':' << std::hex << weighted_sum(member.data)
              << std::dec;
  }
  std::cout << '\n';
}

void print_peak_memory() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmHWM:")) std::cerr << "peak-kib " << std::strtoll(line.c_str() + 6, nullptr, 10) << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  ShardReaderOptions options;
  int at = 1;
  for (; at + 1 < argc && std::string_view(argv[at]).starts_with("--"); at += 2) {
    if (!set_option(argv[at], std::strtol(argv[at + 1], nullptr, 10), options.http)) break;
  }
  if (at + 1 != argc) {
    std::cerr << "usage: read-shard [--attempts N] [--connect-ms N] [--stall-ms N] [--retry-ms N] "
                 "[--max-redirects N] SHARD\n";
    return 2;
  }
  try {
    ShardReader reader(argv[at], options);
    while (auto sample = reader.next()) print_sample(*sample);
    print_peak_memory();
    if (reader.error()) {
      std::cout << "error: " << printable(*reader.error()) << std::endl;
      return 1;
    }
    std::cout << "end" << std::endl;
    return 0;
  } catch (const Error& e) {
    std::cout << "cannot open: " << printable(e.what()) << std::endl;
    return 2;
  }
}
