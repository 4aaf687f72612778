// Test helper: an image encoded by OpenCV (format from the extension), as the
// bytes a shard member would hold.
#pragma once

#include <doctest/doctest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tensorcom::imaging::testing {

inline std::vector<std::byte> encode(const cv::Mat& bgr, const std::string& ext, const std::vector<int>& params = {}) {
  std::vector<std::uint8_t> bytes;
  REQUIRE(cv::imencode(ext, bgr, bytes, params));
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace tensorcom::imaging::testing
