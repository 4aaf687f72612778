// libFuzzer target: make-shards --from-shards --restart-markers on one shard
// (shards come from anywhere): read it as make-shards does, rewrite its JPEG
// members, encode the samples again with TarEncoder, and read the result
// back. A bad shard ends with error() set; what comes back must be exactly
// the samples that went in.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "memory_file.h"
#include "image_rewriter.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/formats/shard_reader.h"
#include "tensorcom/formats/tar_encoder.h"

using namespace tensorcom::formats;
using tensorcom::fuzz::MemoryFile;

namespace {

std::vector<ShardSample> read_shard(const std::uint8_t* data, std::size_t size, const ShardReaderOptions& options) {
  MemoryFile file(data, size);
  std::vector<ShardSample> samples;
  try {
    ShardReader reader(file.path(), options);
    while (auto sample = reader.next()) samples.push_back(std::move(*sample));
  } catch (const tensorcom::Error&) {
  }
  return samples;
}

[[noreturn]] void fail(const char* why, const std::string& detail) {
  std::fprintf(stderr, "fuzz_repack: %s: %s\n", why, detail.c_str());
  __builtin_trap();
}

bool has_oversized_member(const ShardSample& sample) {
  for (const ShardMember& member : sample.members) {
    if (member.oversized) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ShardReaderOptions options;
  options.max_member_bytes = 1 << 16;  // make-shards' --max-member-bytes, at the fuzzer's scale
  std::vector<ShardSample> samples = read_shard(data, size, options);
  // Re-pack as make-shards does: samples with an oversized member are left out.
  TarEncoder encoder(0);  // per input: one that failed is not used again, as in make-shards
  // --restart-markers (fuzz_restart_markers covers --max-side's reduction of one JPEG).
  static make_shards::ImageRewriter rewriter(std::nullopt, true);
  ByteBuffer shard;
  std::vector<ShardSample> packed;
  for (ShardSample& sample : samples) {
    if (has_oversized_member(sample)) continue;
    (void)rewriter.rewrite(sample.members);
    std::vector<TarMember> members;
    for (const ShardMember& m : sample.members) members.push_back({m.name, m.data});
    try {
      ByteBuffer bytes = encoder.encode(members);
      shard.insert(shard.end(), bytes.begin(), bytes.end());
    } catch (const tensorcom::Error&) {
      break;  // a name tar cannot hold: make-shards stops there with the message
    }
    packed.push_back(std::move(sample));
  }
  shard.insert(shard.end(), kTarEndSize, std::byte{0});  // resize() would not zero them (ByteBuffer)
  // Rewritten JPEGs may have grown past the limit: read back without it.
  auto again = read_shard(reinterpret_cast<const std::uint8_t*>(shard.data()), shard.size(), {});
  if (again.size() != packed.size()) {
    fail("samples read back", std::to_string(again.size()) + " of " + std::to_string(packed.size()));
  }
  for (std::size_t i = 0; i < packed.size(); ++i) {
    if (again[i].key != packed[i].key || again[i].members.size() != packed[i].members.size()) {
      fail("sample read back", "key '" + again[i].key + "' for '" + packed[i].key + "'");
    }
    for (std::size_t m = 0; m < packed[i].members.size(); ++m) {
      const ShardMember& a = again[i].members[m];
      const ShardMember& b = packed[i].members[m];
      if (a.name != b.name || a.data != b.data) fail("member read back", "'" + a.name + "' for '" + b.name + "'");
    }
  }
  return 0;
}
