// Batch metadata: which samples a batch holds and where it came from. It
// travels as a msgpack map inside a uint8 tensor whose info is "meta", after
// the batch's other tensors, so any tenbin reader can carry it along and a
// Python reader decodes it with msgpack.unpackb():
//   {"keys": [str...], "shards": [str...], "server": str, "seq": uint,
//    "crops": [[x, y, w, h]...], "flips": [bool...], "sizes": [[w, h]...],
//    "ops": [[name, magnitude, name, magnitude, ...]...],
//    "erase": [[top, left, height, width] or []...],
//    "epoch": uint, "size": uint,
//    "stream": str, "fingerprint": str, "seed": uint, "batch": uint,
//    "batches": uint, "last": bool,
//    "ack": [str...], "run": uint, "ackkey": str}
// The last three are there when the server recorded how each sample was
// made (the image servers do): the crop box in source pixels, whether it was
// mirrored, and the source image's size, so that any sample can be re-made
// and audited (torchvision: resized_crop(img, y, x, h, w, size), then hflip).
// "ops" is there when an augmentation policy ran after the crop: per
// sample, the operations in the order applied, each torchvision's op name
// and its signed magnitude (torchvision: _apply_op(img, name, magnitude)).
// "erase" is there when RandomErasing erased a sample of the batch: per
// sample its box in output pixels, or [] (torchvision: erase(img, top,
// left, height, width, value) on the normalised tensor).
// "epoch" and "size" are there when the server knows them (the image
// servers do): the epoch the batch's samples were read in (counted from 0)
// and its images' height and width in pixels, which --size-schedule changes
// from epoch to epoch ("sizes" is the sources' sizes, per sample). Readers
// skip keys they do not know, so older readers read newer metadata.
// "ack", "run" and "ackkey" ask the receiver to confirm the batch
// (docs/deploy.md, "Delivery"): where the sender takes receipts, the
// sender's run (a random number, new each start) and, with CURVE, the
// receipt socket's public key.
// The last six place the batch in a resumable stream (docs/deploy.md,
// "Resuming"): the server's stable name ("RANK/WORLD" unless named), a
// fingerprint of what decides the stream's batches, the seed, the batch's
// index within its epoch, the epoch's batch count when known in advance,
// and whether it is the epoch's last batch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorcom/codec/tensor.h"

namespace tensorcom {

inline constexpr std::string_view kMetadataInfo = "meta";

// One operation of an augmentation policy, as torchvision's _apply_op
// takes it.
struct SampleOp {
  std::string name;  // "ShearX", "Color", ...
  double magnitude = 0;

  bool operator==(const SampleOp&) const = default;
};

// How one sample was cut from its source image, and what was done to it after.
struct SampleGeometry {
  std::int32_t x = 0;  // crop box in source pixels: left column,
  std::int32_t y = 0;  // top row,
  std::int32_t width = 0;
  std::int32_t height = 0;
  bool flip = false;  // mirrored left to right after resizing
  std::int32_t source_width = 0;
  std::int32_t source_height = 0;
  std::vector<SampleOp> ops;  // the augmentation policy's, in order applied
  // RandomErasing's box, [top, left, height, width] in output pixels.
  std::optional<std::array<std::int32_t, 4>> erase;
  // The seed of the erased box's N(0, 1) values; 0: the box is zeros (not
  // in the metadata).
  std::uint64_t erase_seed = 0;

  bool operator==(const SampleGeometry&) const = default;
};

// Where a batch sits in a server's resumable stream (docs/deploy.md, "Resuming").
struct StreamPlace {
  std::string stream;       // the server's stable name
  std::string fingerprint;  // of what decides the stream's batches
  std::uint64_t seed = 0;
  std::uint64_t batch = 0;               // index within its epoch
  std::optional<std::uint64_t> batches;  // the epoch's batch count, when known in advance
  bool last = false;                     // the epoch's last batch

  bool operator==(const StreamPlace&) const = default;
};

// Where and how a receiver confirms that it took a batch.
struct DeliveryReceipt {
  // Receipt addresses: "tcp:PORT" (on the host the batch came from),
  // "ipc:@NAME" (a Linux abstract socket on this machine).
  std::vector<std::string> to;
  std::uint64_t run = 0;  // the sending run; a receipt names (run, seq)
  std::string key;        // CURVE: the receipt socket's public key (Z85); empty: plain

  bool operator==(const DeliveryReceipt&) const = default;
};

struct BatchMetadata {
  std::vector<std::string> keys;           // sample keys, in batch order
  std::vector<std::string> shards;         // the shard each sample came from, same order
  std::string server;                      // the id of the server that made the batch
  std::uint64_t sequence = 0;              // the batch's number in that server's stream
  std::vector<SampleGeometry> geometry;    // per sample, same order; empty: not recorded
  std::optional<std::uint64_t> epoch;      // the epoch the samples were read in; unset: not recorded
  std::optional<std::uint32_t> size;       // the images' height and width; unset: not recorded
  std::optional<StreamPlace> place;        // where the batch sits in a resumable stream; unset: not recorded
  std::optional<DeliveryReceipt> receipt;  // how to confirm it; unset: no confirmation asked
  // The augmentation flags the server was started with, as given: flag,
  // value, flag, value, ... (a trainer checks them against its recipe);
  // empty: not recorded.
  std::vector<std::string> recipe;

  bool operator==(const BatchMetadata&) const = default;
};

// msgpack bytes of the map above.
[[nodiscard]] std::vector<std::byte> encode_metadata(const BatchMetadata& metadata);
// Decodes what encode_metadata wrote; keys it does not know are skipped.
// Throws FormatError for anything that is not such a map, including trailing
// bytes and nesting or sizes beyond what metadata needs.
[[nodiscard]] BatchMetadata decode_metadata(std::span<const std::byte> bytes);

// The metadata as a uint8 tensor of shape (n,) with info "meta".
[[nodiscard]] Tensor metadata_tensor(const BatchMetadata& metadata);
// Decodes the last tensor whose info is "meta", if the list has one.
// Throws FormatError if that tensor is not valid metadata.
[[nodiscard]] std::optional<BatchMetadata> find_metadata(std::span<const Tensor> tensors);

}  // namespace tensorcom
