// Reading remote units ahead: the units after a stalled one are read while
// it waits, the reader still gets every unit's samples in the epoch's
// order (the stream is the one read without reading ahead), what is held
// stays within its bytes, and units no longer coming are abandoned, their
// waits ended.
#include "read_ahead_source.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "collected_log.h"
#include "epoch_reader.h"
#include "fake_source.h"

using namespace tensorcom;
using namespace tensorcom::pipeline;
using namespace std::chrono_literals;
using tensorcom::pipeline::testing::CollectedLog;
using tensorcom::pipeline::testing::FakeSource;

namespace {

// FakeSource's units, all remote; one of them can be held up (a shard whose
// server has stalled) until released or abandoned.
class RemoteSource final : public SampleSource {
 public:
  RemoteSource(std::size_t units, std::size_t per_unit, std::size_t image_bytes = 16)
      : fake_(units, per_unit, image_bytes) {}

  void stall(std::size_t unit) { stalled_ = unit; }
  void release() { released_ = true; }

  [[nodiscard]] std::size_t units() const noexcept override { return fake_.units(); }
  [[nodiscard]] const char* unit_name() const noexcept override { return "shards"; }
  [[nodiscard]] std::string unit_label(std::size_t unit) const override { return fake_.unit_label(unit); }
  [[nodiscard]] bool is_remote(std::size_t) const override { return true; }
  [[nodiscard]] ByteBuffer read_image(const RawSample& sample) const override { return fake_.read_image(sample); }

  std::optional<std::string> read(std::size_t unit, const std::function<bool(RawSample)>& take, bool images_later,
                                  const std::function<bool()>& abandoned) override {
    {
      std::lock_guard lock(mutex_);
      started_.insert(unit);
    }
    if (unit == stalled_) {
      while (!released_) {
        if (abandoned && abandoned()) {
          ++abandoned_waits_;
          return "stopped";
        }
        std::this_thread::sleep_for(5ms);
      }
    }
    return fake_.read(unit, take, images_later, abandoned);
  }

  [[nodiscard]] std::uint64_t samples_read() const noexcept { return fake_.samples_read(); }
  [[nodiscard]] std::set<std::size_t> started() {
    std::lock_guard lock(mutex_);
    return started_;
  }
  [[nodiscard]] int abandoned_waits() const noexcept { return abandoned_waits_; }

 private:
  FakeSource fake_;
  std::size_t stalled_ = SIZE_MAX;
  std::atomic<bool> released_{false};
  std::atomic<int> abandoned_waits_{0};
  std::mutex mutex_;
  std::set<std::size_t> started_;
};

// Waits up to 10 s for `done`.
template <class Done>
bool eventually(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

std::vector<std::string> keys_of_unit(SampleSource& source, std::size_t unit) {
  std::vector<std::string> keys;
  (void)source.read(unit, [&](RawSample s) {
    keys.push_back(s.key);
    return true;
  });
  return keys;
}

// What an EpochReader hands over, in order: each sample's key and position.
class KeyRecorder final : public ReaderOutput {
 public:
  bool open_batch(BatchPlace, std::size_t, int) override { return true; }
  void end_epoch_at(BatchPlace, std::size_t) override {}
  bool dispatch(Dispatched d) override {
    handed.push_back(d.sample->key + "@" + std::to_string(d.sample->epoch) + "/" + std::to_string(d.sample->position));
    return true;
  }
  std::vector<std::string> handed;
};

std::vector<std::string> read_epochs(SampleSource& source) {
  ReaderOptions o;
  o.batch_size = 4;
  o.epochs = 3;
  o.shuffle_buffer = 8;
  o.order.seed = 11;
  o.size_at = [](std::uint64_t) { return 16; };
  CollectedLog log;
  ServerCounters counters(log.log(), 1);
  KeyRecorder out;
  EpochReader reader(o, source, out, counters, log.log(), {});
  reader.read_all();
  return out.handed;
}

}  // namespace

TEST_CASE("the units after a stalled one are read while it waits") {
  RemoteSource source(6, 5);
  source.stall(0);
  ReadAheadSource ahead(source, {3, 1 << 20});
  const std::vector<std::size_t> order{0, 1, 2, 3, 4, 5};
  ahead.will_read(order, false);
  CHECK(ahead.reading_ahead() == 3);
  std::vector<std::string> first;
  std::thread reader([&] { first = keys_of_unit(ahead, 0); });
  // Units 1-3 read whole while unit 0 (started by the reader's thread,
  // which a loaded machine may schedule late) still waits.
  REQUIRE(eventually([&] { return source.samples_read() == 15 && source.started().count(0) == 1; }));
  CHECK(source.started() == std::set<std::size_t>{0, 1, 2, 3});
  source.release();
  reader.join();
  CHECK(first == std::vector<std::string>{"0/0", "0/1", "0/2", "0/3", "0/4"});
  for (std::size_t unit = 1; unit < 6; ++unit) {
    ahead.will_read(std::span(order).subspan(unit), false);
    const auto keys = keys_of_unit(ahead, unit);
    REQUIRE(keys.size() == 5);
    for (std::size_t i = 0; i < 5; ++i) CHECK(keys[i] == std::to_string(unit) + "/" + std::to_string(i));
  }
  CHECK(ahead.reading_ahead() == 0);
}

TEST_CASE("the reader gets the stream it would get without reading ahead") {
  RemoteSource plain(7, 6);
  RemoteSource remote(7, 6);
  ReadAheadSource ahead(remote, {2, 1 << 20});
  const auto expected = read_epochs(plain);
  REQUIRE(expected.size() == 3 * 42);
  CHECK(read_epochs(ahead) == expected);
}

TEST_CASE("what is read ahead stays within its bytes") {
  // 100-byte images: a share of 2 KiB holds a few samples, never the unit.
  RemoteSource source(3, 200, 100);
  source.stall(0);
  ReadAheadSource ahead(source, {2, 4 << 10});
  const std::vector<std::size_t> order{0, 1, 2};
  ahead.will_read(order, false);
  REQUIRE(eventually([&] { return source.samples_read() >= 2; }));
  std::this_thread::sleep_for(50ms);
  const std::size_t per_sample = sizeof(RawSample) + 3 + 6 + 100;
  CHECK(source.samples_read() <= 2 * ((2 << 10) / per_sample + 1));
  source.release();
  CHECK(keys_of_unit(ahead, 0).size() == 200);
  ahead.will_read(std::span(order).subspan(1), false);
  CHECK(keys_of_unit(ahead, 1).size() == 200);
  ahead.will_read(std::span(order).subspan(2), false);
  CHECK(keys_of_unit(ahead, 2).size() == 200);
}

TEST_CASE("units no longer coming are abandoned, their waits ended") {
  RemoteSource source(8, 5);
  source.stall(2);
  auto ahead = std::make_unique<ReadAheadSource>(source, ReadAheadSource::Options{3, 1 << 20});
  const std::vector<std::size_t> order{0, 1, 2, 3};
  ahead->will_read(order, false);
  REQUIRE(eventually([&] { return source.started().contains(2); }));
  const std::vector<std::size_t> elsewhere{6, 7};
  const auto before = std::chrono::steady_clock::now();
  ahead->will_read(elsewhere, false);  // the epoch ended early: 1-3 are not read
  CHECK(std::chrono::steady_clock::now() - before < 5s);
  CHECK(source.abandoned_waits() == 1);
  CHECK(ahead->reading_ahead() == 1);  // unit 7
  ahead.reset();                       // a reader that ends abandons what it read ahead
}

TEST_CASE("a unit read ahead for other reads is read afresh") {
  RemoteSource source(3, 4);
  ReadAheadSource ahead(source, {2, 1 << 20});
  const std::vector<std::size_t> order{0, 1, 2};
  ahead.will_read(order, true);  // images listed for later
  std::vector<bool> with_images;
  SampleSource& reading = ahead;
  (void)reading.read(1, [&](RawSample s) {
    with_images.push_back(s.image.has_value());
    return true;
  });
  CHECK(with_images == std::vector<bool>{true, true, true, true});
}
