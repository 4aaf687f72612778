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

  SUBCASE("a batch is ready when every slot is committed") {
    for (std::uint8_t i = 0; i < 3; ++i) {
      auto slot = assembler.acquire();
      REQUIRE(slot.has_value());
      REQUIRE(slot->direct != nullptr);
      fill(*slot, i + 1, image_bytes);
      assembler.commit(*slot, nullptr, 10 + i, "k" + std::to_string(i), "s");
    }
    auto batch = assembler.next_ready();
    REQUIRE(batch.has_value());
    CHECK(batch->images.shape() == Shape{3, 2, 2, 3});
    CHECK(batch->labels.values<std::int32_t>()[2] == 12);
    CHECK(batch->images.values<std::uint8_t>()[image_bytes * 2] == 3);
    CHECK(batch->keys == std::vector<std::string>{"k0", "k1", "k2"});
    CHECK(reinterpret_cast<std::uintptr_t>(batch->images.data()) % 64 == 0);
  }
  SUBCASE("an abandoned slot is filled by the next sample") {
    auto a = *assembler.acquire();
    auto b = *assembler.acquire();
    assembler.abandon(a);
    auto c = *assembler.acquire();
    CHECK(c.index == a.index);
    CHECK(c.batch == a.batch);
    auto d = *assembler.acquire();
    for (const auto& s : {b, c, d}) {
      fill(s, 7, image_bytes);
      assembler.commit(s, nullptr, 1, "k", "s");
    }
    CHECK(assembler.next_ready()->labels.dim(0) == 3);
  }
  SUBCASE("finish compacts a partial batch") {
    auto a = *assembler.acquire();
    auto b = *assembler.acquire();
    auto c = *assembler.acquire();
    fill(a, 1, image_bytes);
    fill(c, 3, image_bytes);
    assembler.commit(a, nullptr, 1, "a", "s");
    assembler.abandon(b);
    assembler.commit(c, nullptr, 3, "c", "s");
    assembler.finish();
    auto batch = assembler.next_ready();
    REQUIRE(batch.has_value());
    CHECK(batch->images.shape() == Shape{2, 2, 2, 3});
    CHECK(batch->images.values<std::uint8_t>()[image_bytes] == 3);
    CHECK(batch->labels.values<std::int32_t>()[1] == 3);
    CHECK(batch->keys == std::vector<std::string>{"a", "c"});
    CHECK_FALSE(assembler.next_ready().has_value());
  }
  SUBCASE("finish packs several partial batches so that only the last is short") {
    // Batch 0 loses a slot that no later sample refills while batch 1 has begun.
    std::vector<SampleSlot> first{*assembler.acquire(), *assembler.acquire(), *assembler.acquire()};
    auto next = *assembler.acquire();
    REQUIRE(next.batch != first[0].batch);
    assembler.abandon(first[1]);
    auto pending = *assembler.acquire();  // takes back the abandoned slot ...
    REQUIRE(pending.index == first[1].index);
    assembler.abandon(pending);  // ... and fails again, at the end of the stream
    int value = 1;
    for (const auto& s : {first[0], first[2], next}) {
      fill(s, static_cast<std::uint8_t>(value), image_bytes);
      assembler.commit(s, nullptr, value, "k" + std::to_string(value), "s");
      ++value;
    }
    assembler.finish();
    auto batch = assembler.next_ready();
    REQUIRE(batch.has_value());
    CHECK(batch->images.shape() == Shape{3, 2, 2, 3});
    CHECK(batch->keys == std::vector<std::string>{"k1", "k2", "k3"});
    CHECK(batch->labels.values<std::int32_t>()[2] == 3);
    CHECK(batch->images.values<std::uint8_t>()[image_bytes * 2] == 3);
    CHECK_FALSE(assembler.next_ready().has_value());
  }
  SUBCASE("flush ends an epoch's batches; set_size changes the next ones") {
    BatchAssembler growing(small_format(3), 4, 4);
    for (std::uint8_t i = 0; i < 2; ++i) {
      auto slot = *growing.acquire();
      fill(slot, i + 1, image_bytes);
      growing.commit(slot, nullptr, i, "old" + std::to_string(i), "s", {}, 5);
    }
    growing.flush();
    auto last_of_epoch = growing.next_ready();
    REQUIRE(last_of_epoch.has_value());
    CHECK(last_of_epoch->images.shape() == Shape{2, 2, 2, 3});
    CHECK(last_of_epoch->epoch == 5);
    CHECK(last_of_epoch->size == 2);
    growing.set_size(4);
    const std::size_t big_bytes = 4 * 4 * 3;
    for (std::uint8_t i = 0; i < 3; ++i) {
      auto slot = *growing.acquire();
      fill(slot, 10 + i, big_bytes);
      growing.commit(slot, nullptr, 20 + i, "new", "s", {}, 6);
    }
    auto first_of_next = growing.next_ready();
    REQUIRE(first_of_next.has_value());
    CHECK(first_of_next->images.shape() == Shape{3, 4, 4, 3});
    CHECK(first_of_next->epoch == 6);
    CHECK(first_of_next->size == 4);
    CHECK(first_of_next->images.values<std::uint8_t>()[big_bytes * 2] == 12);
    CHECK(first_of_next->labels.values<std::int32_t>()[2] == 22);
    CHECK(last_of_epoch->images.values<std::uint8_t>()[image_bytes] == 2);  // still intact
    CHECK_THROWS_AS(growing.set_size(5), ArgumentError);                    // larger than its buffers
  }
  SUBCASE("a batch's epoch is its earliest sample's") {
    std::uint64_t epochs[] = {4, 3, 4};
    for (std::uint64_t epoch : epochs) assembler.commit(*assembler.acquire(), nullptr, 0, "k", "s", {}, epoch);
    CHECK(assembler.next_ready()->epoch == 3);
  }
  SUBCASE("memory is bounded: acquire waits for a sent batch to come back") {
    BatchAssembler one(small_format(1), 2);
    std::vector<AssembledBatch> held;
    for (int i = 0; i < 2; ++i) {
      auto slot = *one.acquire();
      one.commit(slot, nullptr, i, "k", "s");
      held.push_back(*one.next_ready());
    }
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      held.clear();  // the transport drops its references
    });
    auto slot = one.acquire();
    CHECK(slot.has_value());
    release.join();
  }
  SUBCASE("memory is bounded: the pipeline holds at most max_batches buffers") {
    BatchAssembler one(small_format(1), 2);
    for (int i = 0; i < 2; ++i) one.commit(*one.acquire(), nullptr, i, "k", "s");  // ready, not yet sent
    std::thread cancel([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      one.cancel();
    });
    CHECK_FALSE(one.acquire().has_value());  // waited until cancelled
    cancel.join();
  }
  SUBCASE("buffers the transport still holds after sending do not stall the pipeline") {
    BatchAssembler one(small_format(1), 2);
    std::vector<Tensor> held_by_transport;  // a stuck subscriber's queue
    for (int i = 0; i < 10; ++i) {
      auto slot = one.acquire();
      REQUIRE(slot.has_value());
      fill(*slot, static_cast<std::uint8_t>(i), image_bytes);
      one.commit(*slot, nullptr, i, "k", "s");
      auto batch = one.next_ready();
      REQUIRE(batch.has_value());
      held_by_transport.push_back(batch->images);  // the batch itself is dropped: sent
    }
    // Every buffer is distinct and intact while the transport holds it.
    for (int i = 0; i < 10; ++i) CHECK(held_by_transport[i].values<std::uint8_t>()[0] == i);
  }
  SUBCASE("cancel wakes a waiting consumer") {
    std::thread cancel([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      assembler.cancel();
    });
    CHECK_FALSE(assembler.next_ready().has_value());
    cancel.join();
    CHECK_FALSE(assembler.acquire().has_value());
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
