// A worker of an image server, in-process: fills slots from samples, and
// from the nearest candidate that can be served when a sample cannot.
#include "slot_filler.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>

#include "collected_log.h"
#include "fake_source.h"
#include "jpeg/jpeg_encoder.h"

using namespace tensorcom;
using namespace tensorcom::pipeline;
using tensorcom::imaging::Problem;
using tensorcom::pipeline::testing::CollectedLog;
using tensorcom::pipeline::testing::FakeSource;

namespace {

constexpr std::size_t kBatch = 4;
constexpr int kSize = 8;

// A 32 x 24 JPEG of one grey level: which sample filled a slot shows in its pixels.
ByteBuffer grey_jpeg(std::uint8_t level) {
  std::vector<std::uint8_t> rgb(32 * 24 * 3, level);
  return jpeg::encode_jpeg(rgb.data(), 32, 24, {});
}

SharedSample sample(const std::string& key, std::int32_t label, ByteBuffer image, std::uint64_t position) {
  RawSample s;
  s.key = key;
  s.shard = "shard-0";
  s.known_label = label;
  s.image_bytes = image.size();
  s.image = std::move(image);
  s.position = position;
  return std::make_shared<const RawSample>(std::move(s));
}

BatchFormat format() {
  BatchFormat f;
  f.size = kSize;
  f.batch_size = kBatch;
  return f;
}

struct Worker {
  explicit Worker(std::int32_t classes = 0) : counters(log.log(), 1), assembler(format(), 4), source(1, 1) {
    options.batch_size = kBatch;
    options.first_size = kSize;
    options.largest = format();
    options.classes = classes;
    filler.emplace(options, assembler, source, counters, counters.worker_clocks(0));
    REQUIRE(assembler.open({0, 0}, kBatch, kSize));
  }
  // The batch once its other slots are filled with good samples.
  AssembledBatch finish_batch(std::size_t served) {
    for (std::size_t p = served; p < kBatch; ++p) {
      filler->serve({sample("good/" + std::to_string(p), 50, grey_jpeg(200), p), {}});
    }
    auto batch = assembler.next_ready();
    REQUIRE(batch.has_value());
    return std::move(*batch);
  }

  CollectedLog log;
  FillerOptions options;
  ServerCounters counters;
  BatchAssembler assembler;
  FakeSource source;
  std::optional<SlotFiller> filler;
};

// The mean of an image of the batch.
double mean_of(const AssembledBatch& batch, std::size_t index) {
  const std::size_t bytes = kSize * kSize * 3;
  const std::uint8_t* pixels = batch.images.values<std::uint8_t>().data() + index * bytes;
  double sum = 0;
  for (std::size_t i = 0; i < bytes; ++i) sum += pixels[i];
  return sum / static_cast<double>(bytes);
}

ByteBuffer garbage() { return ByteBuffer(100, std::byte{0x42}); }

}  // namespace

TEST_CASE("a sample that can be served fills its own slot") {
  Worker w;
  w.filler->serve({sample("a", 3, grey_jpeg(40), 0), {sample("b", 4, grey_jpeg(220), 1)}});
  const AssembledBatch batch = w.finish_batch(1);
  CHECK(batch.labels.values<std::int32_t>()[0] == 3);
  CHECK(batch.keys[0] == "a");
  CHECK(std::abs(mean_of(batch, 0) - 40) < 3);
  CHECK(w.counters.skips().total() == 0);
}

TEST_CASE("a sample that cannot be served is replaced by its nearest candidate that can") {
  Worker w;
  const SharedSample bad = sample("empty", 3, ByteBuffer{}, 1);
  w.filler->serve({sample("first", 1, grey_jpeg(200), 0), {}});
  w.filler->serve(
      {bad,
       {sample("undecodable", 5, garbage(), 2), sample("c", 6, grey_jpeg(90), 3), sample("d", 7, grey_jpeg(160), 4)}});
  const AssembledBatch batch = w.finish_batch(2);
  CHECK(batch.labels.values<std::int32_t>()[1] == 6);
  CHECK(batch.keys[1] == "c");
  CHECK(std::abs(mean_of(batch, 1) - 90) < 3);
  CHECK(batch.empty_slots == 0);
  // The sample is counted as skipped and replaced; a candidate that failed
  // on the way is neither.
  CHECK(w.counters.skips().total() == 1);
  CHECK(w.counters.skips().count(Problem::kEmpty) == 1);
  CHECK(w.counters.replaced(Problem::kEmpty) == 1);
  CHECK(w.counters.unfilled() == 0);
  CHECK(w.log.warning_text().find("skipped sample 'empty' of shard-0: empty") != std::string::npos);
}

TEST_CASE("a replacement is cut as the sample it replaces would have been") {
  // Training crops are drawn from the slot's place: c in slot 1 as a
  // replacement and c served at position 1 itself give the same pixels.
  auto slot_one = [](bool replacing) {
    Worker w;
    w.filler->serve({sample("first", 1, grey_jpeg(200), 0), {}});
    std::vector<std::uint8_t> gradient(64 * 48 * 3);
    for (std::size_t i = 0; i < gradient.size(); ++i) gradient[i] = static_cast<std::uint8_t>(i * 7 % 251);
    const SharedSample c = sample("c", 6, jpeg::encode_jpeg(gradient.data(), 64, 48, {}), replacing ? 9 : 1);
    if (replacing) {
      w.filler->serve({sample("bad", 2, garbage(), 1), {c}});
    } else {
      w.filler->serve({c, {}});
    }
    const AssembledBatch batch = w.finish_batch(2);
    const auto pixels = batch.images.values<std::uint8_t>();
    const std::size_t bytes = kSize * kSize * 3;
    return std::vector<std::uint8_t>(pixels.begin() + bytes, pixels.begin() + 2 * bytes);
  };
  CHECK(slot_one(true) == slot_one(false));
}

TEST_CASE("a slot nothing can fill is left empty, and its batch sent one short") {
  Worker w;
  w.filler->serve({sample("bad", 3, garbage(), 0), {sample("also bad", 4, ByteBuffer{}, 1)}});
  const AssembledBatch batch = w.finish_batch(1);
  CHECK(batch.labels.dim(0) == kBatch - 1);
  CHECK(batch.empty_slots == 1);
  CHECK(w.counters.unfilled() == 1);
  CHECK(w.counters.replaced(Problem::kUndecodable) == 0);
  CHECK(w.log.warning_text().find("none of the 1 samples nearest bad could replace it; its batch is sent one short") !=
        std::string::npos);
}

TEST_CASE("slots nothing can fill are warned about at a bounded rate, each counted") {
  Worker w;
  // Three of the open batch's slots, then three more batches of bad samples.
  for (std::uint64_t batch = 1; batch < 4; ++batch) REQUIRE(w.assembler.open({0, batch}, kBatch, kSize));
  for (std::uint64_t p = 0; p < 4 * kBatch; ++p) w.filler->serve({sample("bad", 3, garbage(), p), {}});
  CHECK(w.counters.unfilled() == 4 * kBatch);
  const std::string text = w.log.warning_text();
  std::size_t lines = 0;
  for (std::size_t at = text.find("could replace it"); at != std::string::npos;
       at = text.find("could replace it", at + 1)) {
    ++lines;
  }
  CHECK(lines >= 1);
  CHECK(lines <= 2);  // one a second
}

TEST_CASE("labels out of range or unreadable are refused, and the sample replaced") {
  Worker w(100);
  auto with_text_label = [](const std::string& key, const std::string& text, std::uint64_t position) {
    RawSample s = *sample(key, 0, grey_jpeg(40), position);
    s.known_label.reset();
    s.label = text;
    return std::make_shared<const RawSample>(std::move(s));
  };
  w.filler->serve({with_text_label("big label", "150", 0), {sample("ok", 99, grey_jpeg(220), 1)}});
  w.filler->serve({with_text_label("text label", "cat", 1), {with_text_label("fine", " 42\n", 2)}});
  const AssembledBatch batch = w.finish_batch(2);
  CHECK(batch.labels.values<std::int32_t>()[0] == 99);
  CHECK(batch.labels.values<std::int32_t>()[1] == 42);
  CHECK(w.counters.skips().count(Problem::kLabelOutOfRange) == 1);
  CHECK(w.counters.skips().count(Problem::kBadLabel) == 1);
}

TEST_CASE("an image listed unread (a resumed epoch's) is read by the worker") {
  Worker w;
  RawSample listed;
  listed.key = "0/0";
  listed.known_label = 8;
  listed.image_offset = 0;
  listed.image_bytes = 16;
  w.source.set_image("0/0", grey_jpeg(120));
  w.filler->serve({std::make_shared<const RawSample>(listed), {}});
  const AssembledBatch batch = w.finish_batch(1);
  CHECK(w.source.images_read_later() == 1);
  CHECK(batch.labels.values<std::int32_t>()[0] == 8);
  CHECK(std::abs(mean_of(batch, 0) - 120) < 3);
}
