// recv-throughput URL... [--count N] [--warmup N] [--curve-secret F --curve-server F] [--decompress-threads N]:
// receives batches with a Connection and prints one JSON line with the
// rate and the process's CPU seconds, for the transport and wire benchmarks
// (tests/bench/transport_throughput.py, wire_compression.py). Compressed
// batches kept compressed (--decompress-threads 0) count their images.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <string>
#include <vector>

#include "tensorcom/transport/connection.h"

using namespace tensorcom;

namespace {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> urls;
  std::uint64_t count = 40, warmup = 5;
  CurveFiles curve;
  ConnectionOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--count" && i + 1 < argc) {
      count = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--warmup" && i + 1 < argc) {
      warmup = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--curve-secret" && i + 1 < argc) {
      curve.secret = argv[++i];
    } else if (arg == "--curve-server" && i + 1 < argc) {
      curve.server = argv[++i];
    } else if (arg == "--decompress-threads" && i + 1 < argc) {
      options.decompress_threads = std::atoi(argv[++i]);
    } else {
      urls.push_back(arg);
    }
  }
  try {
    options.curve = read_curve_security(curve);
    Connection connection(urls, options);
    const Milliseconds timeout(30000);
    for (std::uint64_t i = 0; i < warmup; ++i) {
      if (!connection.recv(timeout)) throw TimeoutError("no batch from " + connection.describe());
    }
    std::uint64_t bytes = 0, samples = 0;
    auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_seconds();
    for (std::uint64_t i = 0; i < count; ++i) {
      auto batch = connection.recv(timeout);
      if (!batch) throw TimeoutError("no batch from " + connection.describe());
      bytes += batch_bytes(*batch);
      samples += batch_size(*batch);
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu_seconds = process_cpu_seconds() - cpu_start;
    std::printf(
        "{\"batches\":%llu,\"bytes\":%llu,\"samples\":%llu,\"seconds\":%.6f,\"cpu_seconds\":%.6f,"
        "\"gb_per_s\":%.4f,\"samples_per_s\":%.1f,\"malformed\":%llu}\n",
        static_cast<unsigned long long>(count), static_cast<unsigned long long>(bytes),
        static_cast<unsigned long long>(samples), seconds, cpu_seconds, static_cast<double>(bytes) / seconds / 1e9,
        static_cast<double>(samples) / seconds, static_cast<unsigned long long>(connection.malformed().total()));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "recv-throughput: %s\n", e.what());
    return 1;
  }
}
