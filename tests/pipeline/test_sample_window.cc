// The replacement window: at most kWindow samples and max_bytes of them,
// but always the newest.
#include <doctest/doctest.h>

#include "sample_window.h"

using namespace tensorcom::pipeline;

namespace {

SharedSample sample_of(std::uint64_t position, std::uint64_t image_bytes) {
  RawSample s;
  s.position = position;
  s.image_bytes = image_bytes;
  return std::make_shared<const RawSample>(std::move(s));
}

}  // namespace

TEST_CASE("a window holds up to kWindow samples, oldest first") {
  SampleWindow window(1 << 30);
  for (std::uint64_t i = 0; i < SampleWindow::kWindow; ++i) {
    window.push(sample_of(i, 10));
    CHECK_FALSE(window.over());
  }
  window.push(sample_of(SampleWindow::kWindow, 10));
  CHECK(window.over());
  CHECK(window.pop()->position == 0);
  CHECK_FALSE(window.over());
  CHECK(window.samples().front()->position == 1);
  window.clear();
  CHECK(window.empty());
}

TEST_CASE("a window over its bytes keeps only the newest sample") {
  const std::uint64_t big = 1000;
  SampleWindow window(buffered_bytes(*sample_of(0, big)) + 10);
  window.push(sample_of(0, big));
  CHECK_FALSE(window.over());  // one sample, however large, stays
  window.push(sample_of(1, big));
  CHECK(window.over());
  CHECK(window.pop()->position == 0);
  CHECK_FALSE(window.over());
}
