#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "collected_log.h"
#include "skip_counter.h"

using namespace tensorcom::pipeline;
using tensorcom::imaging::Problem;

using tensorcom::pipeline::testing::CollectedLog;

TEST_CASE("skips are counted by problem, every problem listed") {
  CollectedLog log("test");
  SkipCounter counter(log.log(), std::chrono::hours(1));
  CHECK(counter.total() == 0);
  CHECK(counter.summary() == "none");
  counter.skip(Problem::kUndecodable, "a", "s.tar", "JPEG: bad Huffman table");
  counter.skip(Problem::kUndecodable, "b", "s.tar", "");
  counter.skip(Problem::kMissingLabel, "c", "s.tar", "no .cls member");
  CHECK(counter.total() == 3);
  CHECK(counter.count(Problem::kUndecodable) == 2);
  CHECK(counter.count(Problem::kMissingLabel) == 1);
  CHECK(counter.count(Problem::kTruncated) == 0);
  CHECK(counter.counts().size() == tensorcom::imaging::kAllProblems.size());
  CHECK(counter.summary() == "undecodable 2, missing label 1");
}

TEST_CASE("warnings are rate-limited, and say how many went unreported") {
  CollectedLog log;
  SkipCounter counter(log.log(), std::chrono::milliseconds(50));
  counter.skip(Problem::kUndecodable, "k1", "shard-0.tar", "detail one");
  for (int i = 0; i < 5; ++i) counter.skip(Problem::kTruncated, "k2", "shard-0.tar", "");
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  counter.skip(Problem::kBadLabel, "k3", "shard-1.tar", "cls is 'x'");
  const std::string text = log.warning_text();
  CHECK(text.find("srv: skipped sample 'k1' of shard-0.tar: undecodable (detail one)") != std::string::npos);
  CHECK(text.find("'k2'") == std::string::npos);
  CHECK(text.find(
            "srv: skipped sample 'k3' of shard-1.tar: bad label (cls is 'x'); 5 more skipped since the last warning") !=
        std::string::npos);
  CHECK(counter.total() == 7);
}

TEST_CASE("names from the shard are printed safely") {
  CollectedLog log;
  SkipCounter counter(log.log());
  counter.skip(Problem::kEmpty, "bad\x1b[2Jkey", "s.tar", "");
  CHECK(log.warning_text().find('\x1b') == std::string::npos);
  CHECK(log.warnings().size() == 1);
}
