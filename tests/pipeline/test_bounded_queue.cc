#include "bounded_queue.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using tensorcom::pipeline::BoundedQueue;

TEST_CASE("every item pushed by several producers is popped exactly once, in each producer's order") {
  constexpr int kProducers = 3, kConsumers = 3, kPerProducer = 2000;
  BoundedQueue<int> queue(7);
  std::vector<std::vector<int>> seen(kConsumers);
  std::vector<std::thread> consumers;
  for (int c = 0; c < kConsumers; ++c) {
    consumers.emplace_back([&, c] {
      while (auto item = queue.pop()) seen[c].push_back(*item);
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) REQUIRE(queue.push(p * kPerProducer + i));
    });
  }
  for (auto& t : producers) t.join();
  queue.close();
  for (auto& t : consumers) t.join();

  std::vector<int> count(kProducers * kPerProducer, 0);
  for (const auto& items : seen) {
    std::vector<int> last(kProducers, -1);
    for (int item : items) {
      ++count[static_cast<std::size_t>(item)];
      int producer = item / kPerProducer;
      CHECK(item > last[static_cast<std::size_t>(producer)]);  // FIFO per producer
      last[static_cast<std::size_t>(producer)] = item;
    }
  }
  for (int c : count) REQUIRE(c == 1);
}

TEST_CASE("close drains what is queued, then refuses pushes and ends pops") {
  BoundedQueue<int> queue(4);
  REQUIRE(queue.push(1));
  REQUIRE(queue.push(2));
  queue.close();
  CHECK_FALSE(queue.push(3));
  CHECK(queue.pop() == 1);
  CHECK(queue.pop() == 2);
  CHECK_FALSE(queue.pop().has_value());
}

TEST_CASE("close wakes a producer blocked on a full queue") {
  BoundedQueue<int> queue(1);
  REQUIRE(queue.push(0));
  std::atomic<int> result{-1};
  std::thread producer([&] { result = queue.push(1) ? 1 : 0; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  queue.close();
  producer.join();
  CHECK(result == 0);
}

TEST_CASE("a producer that found the queue full resumes only once it is half empty") {
  BoundedQueue<int> queue(8);
  for (int i = 0; i < 8; ++i) REQUIRE(queue.push(i));
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    REQUIRE(queue.push(8));
    pushed = true;
  });
  while (queue.blocked_producers() == 0) std::this_thread::yield();
  // Popping three leaves five, more than half: the producer must still wait.
  for (int i = 0; i < 3; ++i) REQUIRE(queue.pop() == i);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(pushed.load());
  REQUIRE(queue.pop() == 3);  // four left: half
  producer.join();
  CHECK(pushed.load());
  for (int i = 4; i <= 8; ++i) CHECK(queue.pop() == i);
}

TEST_CASE("a byte bound holds back items by weight; one heavy item alone still passes") {
  BoundedQueue<int> queue(100, 10, [](const int& bytes) { return static_cast<std::size_t>(bytes); });
  REQUIRE(queue.push(4));
  REQUIRE(queue.push(6));  // exactly the bound
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    REQUIRE(queue.push(3));
    pushed = true;
  });
  while (queue.blocked_producers() == 0) std::this_thread::yield();
  CHECK_FALSE(pushed.load());
  REQUIRE(queue.pop() == 4);  // 6 left: more than half the bytes
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(pushed.load());
  REQUIRE(queue.pop() == 6);
  producer.join();
  CHECK(queue.pop() == 3);
  REQUIRE(queue.push(50));  // heavier than the bound, into an empty queue
  CHECK(queue.pop() == 50);
}
