// A sample as read from a shard or folder, before decoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tensorcom::pipeline {

// Leaves the elements a resize adds uninitialised: encoded images are read
// straight over them, so zeroing every image first would be wasted work.
template <class T>
struct UninitialisedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitialisedAllocator<U>;
  };
  UninitialisedAllocator() = default;
  template <class U>
  explicit UninitialisedAllocator(const UninitialisedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// Bytes read from a file or archive member.
using ByteBuffer = std::vector<std::byte, UninitialisedAllocator<std::byte>>;

struct RawSample {
  std::string key;                   // webdataset key: member path up to the first dot of its base name
  std::string shard;                 // the shard (or folder) it came from, as named by the user
  std::string image_extension;       // "jpg", "jpeg", "png" or "ppm"; empty if the sample has no image
  ByteBuffer image;                  // the encoded image
  std::optional<std::string> label;  // text of the "cls" member, if any
  std::optional<std::int32_t> known_label;  // a label known without text (ImageFolder)
  std::uint64_t oversized_image = 0;  // bytes of an image member (or file) passed over for its size; 0: none
  std::uint64_t sequence = 0;        // position in the served stream; seeds its augmentation
};

}  // namespace tensorcom::pipeline
