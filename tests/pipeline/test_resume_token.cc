// The server's reading of resume tokens: what it takes, and hostile tokens
// refused in bounded time and memory.
#include "resume_token.h"

#include <doctest/doctest.h>
#include <sys/resource.h>

#include <chrono>
#include <string>

#include "tensorcom/codec/error.h"

using namespace tensorcom;
using namespace tensorcom::pipeline;

namespace {

StreamIdentity identity() { return {"0/1", "0123456789abcdef", 7, 0}; }

std::uint64_t peak_rss_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) / 1024;
}

}  // namespace

TEST_CASE("a token's consumed batches and first epoch are read") {
  const std::string token = R"({"format": "tensorcom-resume", "version": 1, "epoch": 2,
    "streams": {"0/1": {"fingerprint": "0123456789abcdef", "seed": 7, "complete": 2,
                        "epochs": {"2": {"consumed": [[0, 3], [5, 6]], "batches": 10}}}}})";
  const StreamResume resume = parse_resume_token(token, "t.json", identity());
  CHECK(resume.first_epoch == 2);
  CHECK(resume.consumed_batches(2) == 4);
  CHECK(resume.consumed_batch(2, 5));
  CHECK_FALSE(resume.consumed_batch(2, 4));
}

TEST_CASE("a token nested deeper than any token is refused as it is read, in bounded memory") {
  const std::string deep(std::size_t{64} << 20, '[');  // the largest file read_resume_token reads
  const std::uint64_t before = peak_rss_mib();
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(parse_resume_token(deep, "deep.json", identity()),
                       doctest::Contains("deep.json: not a resume token: nested more than 16 deep"), ArgumentError);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(peak_rss_mib() - before < 64);
  // Objects too, and arrays inside a valid-looking token.
  std::string objects;
  for (int i = 0; i < 100; ++i) objects += "{\"a\": ";
  CHECK_THROWS_AS(parse_resume_token(objects, "o.json", identity()), ArgumentError);
}
