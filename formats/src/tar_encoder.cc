#include "tensorcom/formats/tar_encoder.h"

#include <archive.h>
#include <archive_entry.h>

#include <utility>

#include "tensorcom/codec/error.h"

namespace tensorcom::formats {

namespace {

struct EntryFree {
  void operator()(archive_entry* entry) const noexcept { archive_entry_free(entry); }
};
using Entry = std::unique_ptr<archive_entry, EntryFree>;

// libarchive's client write callback: everything goes to the ByteBuffer it is given.
la_ssize_t append_output(struct archive*, void* client, const void* buffer, size_t length) {
  auto* out = static_cast<ByteBuffer*>(client);
  const auto* bytes = static_cast<const std::byte*>(buffer);
  out->insert(out->end(), bytes, bytes + length);
  return static_cast<la_ssize_t>(length);
}

}  // namespace

// Heap-allocated so that the address libarchive holds as client data survives
// moves of the encoder.
struct TarEncoder::State {
  struct archive* archive = nullptr;
  ByteBuffer output;
  std::int64_t mtime = 0;

  ~State() {
    // Closing would append the end blocks to output; they are not wanted, and
    // the shard writer adds its own.
    if (archive) archive_write_free(archive);
  }

  void check(int status, const std::string& doing) const {
    if (status < ARCHIVE_WARN) {
      const char* reason = archive_error_string(archive);
      throw Error("tar: cannot " + doing + ": " + (reason ? reason : "unknown libarchive error"));
    }
  }
};

TarEncoder::TarEncoder(std::int64_t mtime) : state_(std::make_unique<State>()) {
  state_->mtime = mtime;
  state_->archive = archive_write_new();
  if (!state_->archive) throw Error("tar: out of memory");
  state_->check(archive_write_set_format_pax_restricted(state_->archive), "select the pax format");
  // No blocking: every header, content and padding byte reaches append_output
  // before the call that writes it returns, so output holds whole members.
  state_->check(archive_write_set_bytes_per_block(state_->archive, 0), "turn off blocking");
  state_->check(archive_write_open2(state_->archive, &state_->output, nullptr, append_output, nullptr, nullptr),
                "open the encoder");
}

TarEncoder::TarEncoder(TarEncoder&&) noexcept = default;
TarEncoder& TarEncoder::operator=(TarEncoder&&) noexcept = default;
TarEncoder::~TarEncoder() = default;

ByteBuffer TarEncoder::encode(std::span<const TarMember> members) {
  state_->output.clear();
  for (const TarMember& member : members) {
    Entry entry(archive_entry_new());
    if (!entry) throw Error("tar: out of memory");
    archive_entry_copy_pathname(entry.get(), member.name.c_str());
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    archive_entry_set_perm(entry.get(), 0644);
    archive_entry_set_uid(entry.get(), 0);
    archive_entry_set_gid(entry.get(), 0);
    archive_entry_set_mtime(entry.get(), static_cast<time_t>(state_->mtime), 0);
    archive_entry_set_size(entry.get(), static_cast<la_int64_t>(member.data.size()));
    state_->check(archive_write_header(state_->archive, entry.get()), "write the header of " + member.name);
    la_ssize_t written = archive_write_data(state_->archive, member.data.data(), member.data.size());
    if (written < 0 || static_cast<std::size_t>(written) != member.data.size())
      state_->check(ARCHIVE_FATAL, "write the contents of " + member.name);
    state_->check(archive_write_finish_entry(state_->archive), "finish " + member.name);
  }
  return std::exchange(state_->output, ByteBuffer{});
}

}  // namespace tensorcom::formats
