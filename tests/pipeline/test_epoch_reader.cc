// The reader of an image server, in-process with a fake source: the order,
// the batches it opens, the candidates it gives each sample, resume skipping,
// epoch boundaries and the memory it holds.
#include "epoch_reader.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "collected_log.h"
#include "fake_source.h"

using namespace tensorcom;
using namespace tensorcom::pipeline;
using tensorcom::pipeline::testing::CollectedLog;
using tensorcom::pipeline::testing::FakeSource;

namespace {

struct Handed {
  std::string key;
  std::uint64_t epoch;
  std::uint64_t position;
  std::vector<std::uint64_t> candidate_positions;
  bool image_read;  // its bytes came with it (not listed for later)
};

// Records what the reader hands over; can refuse after `limit` dispatches.
class Recorder final : public ReaderOutput {
 public:
  explicit Recorder(const FakeSource* source = nullptr) : source_(source) {}
  bool open_batch(BatchPlace place, std::size_t expected, int size) override {
    opened.push_back(place);
    expected_sizes.push_back(expected);
    sizes.push_back(size);
    return true;
  }
  void end_epoch_at(BatchPlace place, std::size_t count) override { ends.emplace_back(place, count); }
  bool dispatch(Dispatched d) override {
    Handed h{d.sample->key, d.sample->epoch, d.sample->position, {}, d.sample->image.has_value()};
    for (const SharedSample& c : d.candidates) h.candidate_positions.push_back(c->position);
    handed.push_back(std::move(h));
    if (source_) most_held = std::max(most_held, source_->samples_read() - handed.size());
    return handed.size() < limit;
  }

  std::vector<Handed> of_epoch(std::uint64_t epoch) const {
    std::vector<Handed> out;
    for (const Handed& h : handed) {
      if (h.epoch == epoch) out.push_back(h);
    }
    return out;
  }

  std::vector<BatchPlace> opened;
  std::vector<std::size_t> expected_sizes;
  std::vector<int> sizes;
  std::vector<std::pair<BatchPlace, std::size_t>> ends;
  std::vector<Handed> handed;
  std::uint64_t most_held = 0;  // samples read and not yet handed over, at most
  std::size_t limit = SIZE_MAX;

 private:
  const FakeSource* source_;
};

ReaderOptions options(std::size_t batch_size, std::uint64_t epochs) {
  ReaderOptions o;
  o.batch_size = batch_size;
  o.epochs = epochs;
  o.shuffle_buffer = 8;
  o.size_at = [](std::uint64_t epoch) { return 10 + static_cast<int>(epoch); };
  return o;
}

std::vector<std::string> keys(const std::vector<Handed>& handed) {
  std::vector<std::string> out;
  for (const Handed& h : handed) out.push_back(h.key);
  return out;
}

// Runs a reader over `source` and returns what it handed over.
struct Run {
  Run(FakeSource& source, ReaderOptions o, std::function<bool()> stop = {})
      : counters(log.log(), 1), reader(std::move(o), source, out, counters, log.log(), std::move(stop)) {}
  CollectedLog log;
  Recorder out;
  ServerCounters counters;
  EpochReader reader;
};

}  // namespace

TEST_CASE("every sample is handed over once an epoch, in positions, its batches opened in order") {
  FakeSource source(3, 7);
  Run run(source, options(4, 2));
  run.reader.read_all();
  CHECK_FALSE(run.reader.failed());
  for (std::uint64_t epoch : {0, 1}) {
    const auto handed = run.out.of_epoch(epoch);
    REQUIRE(handed.size() == 21);
    std::set<std::string> distinct;
    for (std::size_t i = 0; i < handed.size(); ++i) {
      CHECK(handed[i].position == i);
      distinct.insert(handed[i].key);
    }
    CHECK(distinct.size() == 21);
  }
  // 21 samples in batches of 4: 6 batches an epoch, the last of one sample.
  REQUIRE(run.out.opened.size() == 12);
  for (std::uint64_t i = 0; i < 12; ++i) CHECK(run.out.opened[i] == BatchPlace{i / 6, i % 6});
  CHECK(run.out.sizes.front() == 10);
  CHECK(run.out.sizes.back() == 11);  // each epoch's own size
  REQUIRE(run.out.ends.size() == 2);
  CHECK(run.out.ends[0] == std::pair{BatchPlace{0, 5}, std::size_t{1}});
  CHECK(run.out.ends[1] == std::pair{BatchPlace{1, 5}, std::size_t{1}});
}

TEST_CASE("the order is the seed's and the epoch's") {
  auto order = [](std::uint64_t seed) {
    FakeSource source(4, 6);
    ReaderOptions o = options(4, 2);
    o.order.seed = seed;
    Run run(source, o);
    run.reader.read_all();
    return std::pair{keys(run.out.of_epoch(0)), keys(run.out.of_epoch(1))};
  };
  const auto first = order(1);
  CHECK(first == order(1));
  CHECK(first.first != first.second);
  CHECK(first.first != order(2).first);
}

TEST_CASE("a sample's candidates are the samples after it, then those before it, nearest first") {
  FakeSource source(2, 20);
  Run run(source, options(8, 1));
  run.reader.read_all();
  const auto handed = run.out.of_epoch(0);
  REQUIRE(handed.size() == 40);
  // Mid-epoch: the window of samples read after it.
  std::vector<std::uint64_t> after;
  for (std::uint64_t p = 1; p <= SampleWindow::kWindow; ++p) after.push_back(p);
  CHECK(handed[0].candidate_positions == after);
  // The last: none after it, the ones handed over before, nearest first.
  const std::vector<std::uint64_t>& last = handed[39].candidate_positions;
  REQUIRE(last.size() == SampleWindow::kWindow);
  for (std::size_t i = 0; i < last.size(); ++i) CHECK(last[i] == 38 - i);
  // Near the end: the rest after it, then the ones before.
  const std::vector<std::uint64_t>& near = handed[37].candidate_positions;
  REQUIRE(near.size() >= 3);
  CHECK(near[0] == 38);
  CHECK(near[1] == 39);
  CHECK(near[2] == 36);
}

TEST_CASE("samples that cannot be served are never candidates, and a long run of them is looked past") {
  // A folder of failed downloads: 600 empty images around two good ones.
  FakeSource source(1, 602);
  const std::set<std::string> good = {"0/0", "0/601"};
  for (std::size_t i = 0; i < 602; ++i) {
    const std::string key = "0/" + std::to_string(i);
    if (!good.count(key)) source.set_image(key, ByteBuffer{});
  }
  Run run(source, options(8, 1));
  run.reader.read_all();
  const auto handed = run.out.of_epoch(0);
  REQUIRE(handed.size() == 602);
  std::map<std::uint64_t, std::string> key_at;
  for (const Handed& h : handed) key_at[h.position] = h.key;
  for (const Handed& h : handed) {
    // Every sample has a good one to stand in for it, however far.
    CHECK_MESSAGE(!h.candidate_positions.empty(), h.key);
    for (std::uint64_t p : h.candidate_positions) CHECK(good.count(key_at.at(p)) == 1);
  }
}

TEST_CASE("a resumed epoch passes over the consumed batches, reading nothing of them") {
  FakeSource source(3, 8);
  ReaderOptions o = options(4, 3);
  o.resume.first_epoch = 1;
  o.resume.consumed[1] = {{0, 2}, {4, 5}};  // batches 0, 1 and 4 of epoch 1
  Run run(source, o);
  run.reader.read_all();
  CHECK(run.out.of_epoch(0).empty());  // wholly consumed before
  const auto resumed = run.out.of_epoch(1);
  CHECK(resumed.size() == 24 - 12);
  std::set<std::uint64_t> batches;
  for (const Handed& h : resumed) {
    batches.insert(h.position / 4);
    CHECK_FALSE(h.image_read);  // listed for the worker to read
  }
  CHECK(batches == std::set<std::uint64_t>{2, 3, 5});
  CHECK(run.counters.replayed() == 12);
  CHECK(run.out.of_epoch(2).size() == 24);
  for (const Handed& h : run.out.of_epoch(2)) CHECK(h.image_read);
  // The same samples in the same places as an uninterrupted run.
  FakeSource again(3, 8);
  Run whole(again, options(4, 3));
  whole.reader.read_all();
  const auto all = whole.out.of_epoch(1);
  for (const Handed& h : resumed) CHECK(all[h.position].key == h.key);
  const auto& log = run.log.progress();
  CHECK(std::find(log.begin(), log.end(),
                  "srv: epoch 1: resumed: 3 batches consumed before the resume were passed over, not decoded") !=
        log.end());
}

TEST_CASE("what the reader holds is bounded by its memory limit") {
  // 120 samples of 1 MiB, a shuffle buffer of 1000 samples but 8 MiB of memory.
  FakeSource source(3, 40, 1 << 20);
  ReaderOptions o = options(4, 1);
  o.shuffle_buffer = 1000;
  o.memory_limit = 8 << 20;
  Run run(source, o);
  run.out = Recorder(&source);
  run.reader.read_all();
  CHECK(run.out.handed.size() == 120);
  // 6 MiB in the shuffle buffer, a sample in each window, one in hand.
  CHECK(run.out.most_held <= 9);
  for (const Handed& h : run.out.handed) CHECK(h.candidate_positions.size() <= 2);
}

TEST_CASE("--epoch-batches: a short share is read again, a long one cut") {
  // Reads `units` x `per_unit` samples in batches of 4 with a quota of
  // `batches`; returns the samples handed over and the last progress line.
  auto read = [](std::size_t units, std::size_t per_unit, std::uint64_t batches) {
    FakeSource source(units, per_unit);
    ReaderOptions o = options(4, 1);
    o.epoch_batches = batches;
    Run run(source, o);
    run.reader.read_all();
    CHECK(run.out.opened.size() == batches);
    return std::pair{run.out.handed.size(), run.log.progress().back()};
  };
  const auto [short_taken, short_line] = read(1, 5, 3);
  CHECK(short_taken == 12);
  CHECK(short_line.find("the share was read 3 times") != std::string::npos);
  const auto [long_taken, long_line] = read(2, 10, 2);
  CHECK(long_taken == 8);
  CHECK(long_line.find("the rest of the share is left out") != std::string::npos);
}

TEST_CASE("a unit that fails is counted and the others served") {
  FakeSource source(3, 6);
  source.fail_unit(1, 2);
  Run run(source, options(4, 1));
  run.reader.read_all();
  CHECK(run.out.handed.size() == 6 + 2 + 6);
  CHECK(run.counters.shard_errors() == 1);
  CHECK(run.log.warning_text().find("unit-1 abandoned: unit-1 broke") != std::string::npos);
}

TEST_CASE("an epoch with no samples ends serving with a message") {
  FakeSource source(2, 0);
  Run run(source, options(4, 0));  // forever: must not spin
  run.reader.read_all();
  CHECK(run.reader.failed());
  CHECK(run.log.warning_text() == "srv: epoch 0 found no samples; stopping\n");
}

TEST_CASE("a stop request or a refusing output ends reading") {
  SUBCASE("stop") {
    FakeSource source(2, 50);
    std::atomic<int> polls{0};
    Run run(source, options(4, 0), [&] { return ++polls > 30; });
    run.reader.read_all();
    CHECK_FALSE(run.reader.failed());
    CHECK(run.out.handed.size() < 50);
  }
  SUBCASE("output refuses") {
    FakeSource source(2, 50);
    Run run(source, options(4, 0));
    run.out.limit = 10;
    run.reader.read_all();
    CHECK(run.out.handed.size() == 10);
  }
}
