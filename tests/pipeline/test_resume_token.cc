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

namespace {

std::string token_with(const std::string& stream, const std::string& epochs, const std::string& top = "\"epoch\": 0,",
                       const std::string& seed = "7", const std::string& fingerprint = "0123456789abcdef") {
  return "{\"format\": \"tensorcom-resume\", \"version\": 1, " + top + " \"streams\": {\"" + stream +
         "\": {\"fingerprint\": \"" + fingerprint + "\", \"seed\": " + seed + ", \"complete\": 0, \"epochs\": {" +
         epochs + "}}}}";
}

StreamResume parse(const std::string& text) { return parse_resume_token(text, "t.json", identity()); }

}  // namespace

TEST_CASE("the server reads tokens as tensorcom.resume does") {
  SUBCASE("adjacent ranges are joined, as the trainer records them") {
    const StreamResume r = parse(token_with("0/1", R"("0": {"consumed": [[0, 2], [2, 5]], "batches": 8})"));
    CHECK(r.consumed.at(0) == BatchRanges{{0, 5}});
  }
  SUBCASE("the top-level epoch may be left out") { CHECK(parse(token_with("0/1", "", "")).first_epoch == 0); }
  SUBCASE("a seed is any uint64, as --seed is") {
    StreamIdentity big = identity();
    big.seed = 18446744073709551615ull;
    CHECK(parse_resume_token(token_with("0/1", "", "", "18446744073709551615"), "t.json", big).first_epoch == 0);
  }
  SUBCASE("an epoch of 0 batches is refused") {
    CHECK_THROWS_WITH_AS(parse(token_with("0/1", R"("0": {"consumed": [], "batches": 0})")),
                         doctest::Contains("is 0: an epoch has at least one batch"), ArgumentError);
  }
  SUBCASE("epoch keys with leading zeros are refused: 7 and 007 cannot both name epoch 7") {
    CHECK_THROWS_WITH_AS(
        parse(token_with("0/1", R"("7": {"consumed": [[0, 1]], "batches": 4}, "007": {"consumed": [], "batches": 4})")),
        doctest::Contains("without leading zeros: \"007\""), ArgumentError);
  }
  SUBCASE("a fingerprint that is not 16 hex digits is refused, for any stream") {
    CHECK_THROWS_WITH_AS(parse(token_with("other", "", "", "7", "xyz")),
                         doctest::Contains("'streams.other.fingerprint' is not 16 hex digits"), ArgumentError);
  }
  SUBCASE("control bytes of a stream's name are escaped in the message") {
    try {
      (void)parse(token_with("rank\\u001b[2J", "", "", "-1"));
      FAIL("accepted");
    } catch (const ArgumentError& e) {
      const std::string what = e.what();
      CHECK(what.find('\x1b') == std::string::npos);
      CHECK(what.find("rank\\x1b[2J") != std::string::npos);
    }
  }
}

TEST_CASE("a token nested deeper than any token is refused as it is read, in bounded memory") {
  const std::string deep(std::size_t{64} << 20, '[');  // the largest file read_resume_token reads
  const std::uint64_t before = peak_rss_mib();
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS((void)parse_resume_token(deep, "deep.json", identity()),
                       doctest::Contains("deep.json: not a resume token: nested more than 16 deep"), ArgumentError);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(peak_rss_mib() - before < 64);
  // Objects too, and arrays inside a valid-looking token.
  std::string objects;
  for (int i = 0; i < 100; ++i) objects += "{\"a\": ";
  CHECK_THROWS_AS((void)parse_resume_token(objects, "o.json", identity()), ArgumentError);
}
