#include "receive_memory.h"

#include "malloc_tuning.h"

namespace tensorcom::detail {

namespace {

// Whether sending makes a large copy (a single-buffer encoding, or a tensor
// without an owner, whose memory must be copied into the message).
bool copies_large_buffers(std::span<const Tensor> batch, Framing framing) noexcept {
  if (framing == Framing::kSingleBuffer) return batch_bytes(batch) >= ReceiveMemory::kLargeCopyBytes;
  for (const Tensor& t : batch) {
    if (!t.owner() && t.nbytes() >= ReceiveMemory::kLargeCopyBytes) return true;
  }
  return false;
}

}  // namespace

ReceiveMemory::ReceiveMemory(bool reuse, bool receives) : reuse_(reuse), keeps_(reuse && receives) {
  if (keeps_) keep_large_buffers_mapped();
}

void ReceiveMemory::before_send(std::span<const Tensor> batch, Framing framing) {
  if (keeps_ || !reuse_ || !copies_large_buffers(batch, framing)) return;
  keep_large_buffers_mapped();
  keeps_ = true;
}

std::optional<ReceiveMemory::Clock::time_point> ReceiveMemory::release_due(Clock::time_point now) const noexcept {
  if (!keeps_ || released_since_message_) return std::nullopt;
  return now + kIdleBeforeRelease;
}

void ReceiveMemory::release() {
  return_free_memory();
  released_since_message_ = true;
}

void ReceiveMemory::close() {
  if (keeps_) return_free_memory();
}

}  // namespace tensorcom::detail
