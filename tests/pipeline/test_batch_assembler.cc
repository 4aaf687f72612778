// Batch assembly into the sent memory, and the output formats.
#include <doctest/doctest.h>

#include <cstring>
#include <thread>

#include "batch_assembler.h"

using namespace tensorcom;
using namespace tensorcom::pipeline;

namespace {

BatchFormat small_format(std::size_t batch) {
  BatchFormat f;
  f.size = 2;
  f.batch_size = batch;
  return f;
}

void fill(const SampleSlot& slot, std::uint8_t value, std::size_t bytes) { std::memset(slot.direct, value, bytes); }

}  // namespace

TEST_CASE("batch assembler") {
  BatchAssembler assembler(small_format(3), 4);
  const std::size_t image_bytes = 2 * 2 * 3;
  const BatchPlace first{0, 0};

  SUBCASE("a batch is ready when every slot is committed, in slot order whatever the commit order") {
    REQUIRE(assembler.open(first, 3, 2));
    for (std::size_t i : {2, 0, 1}) {
      auto slot = assembler.slot(first, i);
      REQUIRE(slot.direct != nullptr);
      fill(slot, static_cast<std::uint8_t>(i + 1), image_bytes);
      assembler.commit(slot, nullptr, static_cast<std::int32_t>(10 + i), "k" + std::to_string(i), "s");
    }
    auto batch = assembler.next_ready();
    REQUIRE(batch.has_value());
    CHECK(batch->images.shape() == Shape{3, 2, 2, 3});
    CHECK(batch->labels.values<std::int32_t>()[2] == 12);
    CHECK(batch->images.values<std::uint8_t>()[image_bytes * 2] == 3);
    CHECK(batch->keys == std::vector<std::string>{"k0", "k1", "k2"});
    CHECK(batch->place == first);
    CHECK_FALSE(batch->last);
    CHECK(reinterpret_cast<std::uintptr_t>(batch->images.data()) % 64 == 0);
  }
  SUBCASE("batches are handed out in the order they were opened") {
    const BatchPlace second{0, 1};
    REQUIRE(assembler.open(first, 3, 2));
    REQUIRE(assembler.open(second, 3, 2));
    for (std::size_t i = 0; i < 3; ++i) assembler.commit(assembler.slot(second, i), nullptr, 2, "b", "s");
    CHECK(assembler.ready_batches() == 1);
    for (std::size_t i = 0; i < 3; ++i) assembler.commit(assembler.slot(first, i), nullptr, 1, "a", "s");
    CHECK(assembler.next_ready()->place == first);
    CHECK(assembler.next_ready()->place == second);
  }
  SUBCASE("a slot left empty: the batch is sent one short, its samples in order") {
    REQUIRE(assembler.open(first, 3, 2));
    for (std::size_t i : {0, 2}) {
      auto slot = assembler.slot(first, i);
      fill(slot, static_cast<std::uint8_t>(i + 1), image_bytes);
      assembler.commit(slot, nullptr, static_cast<std::int32_t>(i), "k" + std::to_string(i), "s");
    }
    assembler.leave_empty(assembler.slot(first, 1));
    auto batch = assembler.next_ready();
    REQUIRE(batch.has_value());
    CHECK(batch->labels.dim(0) == 2);
    CHECK(batch->empty_slots == 1);
    CHECK(batch->keys == std::vector<std::string>{"k0", "k2"});
    CHECK(batch->labels.values<std::int32_t>()[1] == 2);
    CHECK(batch->images.values<std::uint8_t>()[image_bytes] == 3);
  }
  SUBCASE("an epoch's last batch ends where its samples end") {
    REQUIRE(assembler.open(first, 3, 2));
    assembler.commit(assembler.slot(first, 0), nullptr, 0, "k", "s");
    assembler.end_epoch_at(first, 1);
    auto batch = assembler.next_ready();
    REQUIRE(batch.has_value());
    CHECK(batch->labels.dim(0) == 1);
    CHECK(batch->last);
    CHECK_THROWS_AS((void)assembler.slot(first, 0), Error);  // handed out: no longer open
  }
  SUBCASE("each batch has its own size") {
    BatchAssembler sized(small_format(1), 4, 4);
    REQUIRE(sized.open({0, 0}, 1, 2));
    REQUIRE(sized.open({1, 0}, 1, 4));
    sized.commit(sized.slot({0, 0}, 0), nullptr, 0, "a", "s");
    sized.commit(sized.slot({1, 0}, 0), nullptr, 0, "b", "s");
    CHECK(sized.next_ready()->images.shape() == Shape{1, 2, 2, 3});
    auto bigger = sized.next_ready();
    CHECK(bigger->images.shape() == Shape{1, 4, 4, 3});
    CHECK(bigger->size == 4);
    CHECK_THROWS_AS((void)sized.open({2, 0}, 1, 5), ArgumentError);
  }
  SUBCASE("finish: nothing once every opened batch is out") {
    REQUIRE(assembler.open(first, 3, 2));
    assembler.finish();
    for (std::size_t i = 0; i < 3; ++i) assembler.commit(assembler.slot(first, i), nullptr, 0, "k", "s");
    CHECK(assembler.next_ready().has_value());
    CHECK_FALSE(assembler.next_ready().has_value());
  }
  SUBCASE("memory is bounded: open waits for a sent batch to come back") {
    BatchAssembler one(small_format(1), 2);
    std::vector<AssembledBatch> held;
    for (std::uint64_t i = 0; i < 2; ++i) {
      REQUIRE(one.open({0, i}, 1, 2));
      one.commit(one.slot({0, i}, 0), nullptr, static_cast<std::int32_t>(i), "k", "s");
      held.push_back(*one.next_ready());
    }
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      held.clear();  // the transport drops its references
    });
    CHECK(one.open({0, 2}, 1, 2));
    release.join();
  }
  SUBCASE("memory is bounded: the pipeline holds at most max_batches buffers") {
    BatchAssembler one(small_format(1), 2);
    for (std::uint64_t i = 0; i < 2; ++i) {
      REQUIRE(one.open({0, i}, 1, 2));
      one.commit(one.slot({0, i}, 0), nullptr, 0, "k", "s");  // ready, not yet sent
    }
    std::thread cancel([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      one.cancel();
    });
    CHECK_FALSE(one.open({0, 2}, 1, 2));  // waited until cancelled
    cancel.join();
  }
  SUBCASE("buffers the transport still holds after sending do not stall the pipeline") {
    BatchAssembler one(small_format(1), 2);
    std::vector<Tensor> held_by_transport;  // a stuck subscriber's queue
    for (std::uint64_t i = 0; i < 10; ++i) {
      REQUIRE(one.open({0, i}, 1, 2));
      auto slot = one.slot({0, i}, 0);
      fill(slot, static_cast<std::uint8_t>(i), image_bytes);
      one.commit(slot, nullptr, static_cast<std::int32_t>(i), "k", "s");
      auto batch = one.next_ready();
      REQUIRE(batch.has_value());
      held_by_transport.push_back(batch->images);  // the batch itself is dropped: sent
    }
    // Every buffer is distinct and intact while the transport holds it.
    for (std::size_t i = 0; i < 10; ++i) CHECK(held_by_transport[i].values<std::uint8_t>()[0] == i);
  }
  SUBCASE("cancel wakes a waiting consumer") {
    std::thread cancel([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      assembler.cancel();
    });
    CHECK_FALSE(assembler.next_ready().has_value());
    cancel.join();
    CHECK_FALSE(assembler.open(first, 3, 2));
  }
}

TEST_CASE("output formats") {
  // One 1x1 image would be trivial: use 2x2 with distinct channels.
  const std::uint8_t hwc[12] = {0, 51, 102, 153, 204, 255, 10, 20, 30, 40, 50, 60};
  BatchFormat f = small_format(1);
  SUBCASE("uint8 BCHW is planar") {
    f.layout = ImageLayout::kBCHW;
    std::uint8_t out[12];
    convert_image(f, hwc, reinterpret_cast<std::byte*>(out));
    const std::uint8_t planar[12] = {0, 153, 10, 40, 51, 204, 20, 50, 102, 255, 30, 60};
    CHECK(std::memcmp(out, planar, 12) == 0);
    CHECK(f.image_shape(5) == Shape{5, 3, 2, 2});
  }
  SUBCASE("float32 is normalised per channel") {
    f.pixels = PixelType::kFloat32;
    float out[12];
    convert_image(f, hwc, reinterpret_cast<std::byte*>(out));
    CHECK(out[0] == doctest::Approx((0 / 255.0 - 0.485) / 0.229));
    CHECK(out[5] == doctest::Approx((255 / 255.0 - 0.406) / 0.225));
    CHECK(f.dtype() == DType::kFloat32);
    CHECK(f.image_bytes() == 48);
  }
  SUBCASE("float16 BCHW") {
    f.pixels = PixelType::kFloat16;
    f.layout = ImageLayout::kBCHW;
    f.mean = {0, 0, 0};
    f.std = {1, 1, 1};
    std::uint16_t out[12];
    convert_image(f, hwc, reinterpret_cast<std::byte*>(out));
    CHECK(out[0] == 0x0000);  // 0.0
    CHECK(out[9] == 0x3c00);  // channel 2 of pixel 1: 255/255 = 1.0
  }
}
