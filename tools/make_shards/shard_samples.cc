#include "shard_samples.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>

#include "tensorcom/error.h"

namespace make_shards {

struct ShardSamples::Archive {
  struct ::archive* handle = archive_read_new();
  ~Archive() { archive_read_free(handle); }
  // libarchive leaves the message unset after some failures (a corrupt gzip
  // stream, for one): never build a string from its null.
  [[nodiscard]] std::string message() const {
    const char* text = archive_error_string(handle);
    return text ? text : "unreadable (libarchive gave no reason)";
  }
};

std::optional<std::string> member_key(const std::string& path) {
  const std::size_t base = path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1;
  const std::size_t dot = path.find('.', base);
  if (dot == std::string::npos || dot == base) return std::nullopt;
  return path.substr(0, dot);
}

ShardSamples::ShardSamples(const std::string& path) : archive_(std::make_unique<Archive>()), path_(path) {
  archive_read_support_filter_all(archive_->handle);
  archive_read_support_format_tar(archive_->handle);
  archive_read_support_format_gnutar(archive_->handle);
  if (archive_read_open_filename(archive_->handle, path.c_str(), 1 << 20) != ARCHIVE_OK) {
    throw tensorcom::IoError("cannot open shard " + path + ": " + archive_->message(),
                             archive_errno(archive_->handle));
  }
}

ShardSamples::ShardSamples(ShardSamples&&) noexcept = default;
ShardSamples& ShardSamples::operator=(ShardSamples&&) noexcept = default;
ShardSamples::~ShardSamples() = default;

bool ShardSamples::read_member() {
  for (;;) {
    archive_entry* entry = nullptr;
    const int status = archive_read_next_header(archive_->handle, &entry);
    if (status == ARCHIVE_EOF) return false;
    if (status < ARCHIVE_WARN) {
      error_ = path_ + ": " + archive_->message();
      return false;
    }
    const char* name = archive_entry_pathname(entry);
    std::optional<std::string> key = name ? member_key(name) : std::nullopt;
    if (archive_entry_filetype(entry) != AE_IFREG || !key) {
      ++skipped_;
      continue;
    }
    ShardMember member{name, Bytes(static_cast<std::size_t>(std::max<la_int64_t>(archive_entry_size(entry), 0)))};
    la_ssize_t got = member.data.empty() ? 0 : archive_read_data(archive_->handle, member.data.data(), member.data.size());
    if (got != static_cast<la_ssize_t>(member.data.size())) {
      error_ = path_ + ": member " + member.name + " is cut short" +
               (got < 0 ? std::string(": ") + archive_->message() : std::string());
      return false;
    }
    pending_ = std::move(member);
    pending_key_ = std::move(*key);
    return true;
  }
}

std::optional<std::vector<ShardMember>> ShardSamples::next() {
  if (done_) return std::nullopt;
  if (!pending_ && !read_member()) {
    done_ = true;
    return std::nullopt;
  }
  std::vector<ShardMember> sample;
  const std::string key = pending_key_;
  while (pending_ && pending_key_ == key) {
    sample.push_back(std::move(*pending_));
    pending_.reset();
    if (!read_member()) done_ = true;
  }
  // A damaged shard still yields the whole samples before the damage; the
  // sample it cut is dropped, since its members may be missing.
  if (done_ && error_) return std::nullopt;
  return sample;
}

}  // namespace make_shards
