#include "sample_source.h"

#include <cerrno>
#include <chrono>
#include <thread>

#include "tensorcom/codec/error.h"
#include "tensorcom/formats/file_io.h"
#include "tensorcom/formats/printable.h"
#include "tensorcom/formats/shard_reader.h"
#include "tensorcom/formats/webdataset.h"
#include "tensorcom/codec/regular_file.h"
#include "tensorcom/imaging/format.h"

namespace tensorcom::pipeline {

namespace {

bool has_image(const formats::ShardSample& sample) {
  for (const formats::ShardMember& member : sample.members) {
    if (formats::is_image_extension(member.extension)) return true;
  }
  return false;
}

// The server's view of a shard sample: its first image and its label.
RawSample to_raw_sample(formats::ShardSample&& sample, std::string shard) {
  RawSample raw;
  raw.key = std::move(sample.key);
  raw.shard = std::move(shard);
  for (formats::ShardMember& member : sample.members) {
    if (member.extension == "cls") {
      if (!member.oversized)
        raw.label = std::string(reinterpret_cast<const char*>(member.data.data()), member.data.size());
    } else if (member.oversized) {
      raw.oversized_image = member.size;  // skipped for its real reason, not as imageless
    } else {
      // What it weighs when read: all of it, or the head of a non-image.
      raw.image_bytes = member.unread ? member.size : member.data.size();
      if (member.unread) raw.image_offset = member.offset;
      if (!member.unread) raw.image = std::move(member.data);
    }
  }
  return raw;
}

// A resumed epoch passes over the images: reading a tar header and a label
// should not bring in the next 1 MiB of the file.
constexpr std::size_t kReplayReadBlock = 8 << 10;

class ShardSource final : public SampleSource {
 public:
  ShardSource(std::vector<std::string> shards, std::uint64_t max_image_bytes, std::function<bool()> cancelled)
      : shards_(std::move(shards)), max_image_bytes_(max_image_bytes), cancelled_(std::move(cancelled)) {}

  std::size_t units() const noexcept override { return shards_.size(); }
  const char* unit_name() const noexcept override { return "shards"; }
  std::string unit_label(std::size_t unit) const override { return log_name(unit); }

  bool is_remote(std::size_t unit) const override { return !formats::local_shard_path(shards_[unit]); }

  std::optional<std::string> read(std::size_t unit, const std::function<bool(RawSample)>& take, bool images_later,
                                  const std::function<bool()>& abandoned) override {
    const std::string& shard = shards_[unit];
    formats::ShardReaderOptions options;
    options.max_member_bytes = max_image_bytes_;
    options.cancelled = cancelled_;
    if (abandoned) options.cancelled = [this, &abandoned] { return abandoned() || (cancelled_ && cancelled_()); };
    // The first image of a sample, and its label: nothing else is read.
    options.wanted = [](const formats::ShardSample& so_far, std::string_view extension) {
      return extension == "cls" || (formats::is_image_extension(extension) && !has_image(so_far));
    };
    // An "image" whose first bytes are no image format is read no further:
    // its head is enough for the decoder to skip it as undecodable.
    if (images_later) {
      options.read_block = kReplayReadBlock;
      options.list_only_with_offset = true;
      options.listed_only = [](const formats::ShardSample&, std::string_view extension) {
        return formats::is_image_extension(extension);
      };
    }
    options.keep = [](std::string_view extension, std::span<const std::byte> head) {
      return !formats::is_image_extension(extension) || imaging::sniff_format(head) != imaging::ImageFormat::kUnknown;
    };
    try {
      formats::ShardReader reader = open_reader(shard, options);
      // Samples go to peers with their shard's name (--meta): never a pipe's command.
      const std::string name = formats::public_shard_name(shard, unit);
      while (auto sample = reader.next()) {
        if (!take(to_raw_sample(std::move(*sample), name))) return std::nullopt;
      }
      if (reader.error() && !(options.cancelled && options.cancelled()))
        return "shard " + log_name(unit) + " ended early: " + *reader.error();
    } catch (const IoError& e) {
      return std::string("skipping shard: ") + e.what();
    }
    return std::nullopt;
  }

  ByteBuffer read_image(const RawSample& sample) const override {
    const std::optional<std::string> path = formats::local_shard_path(shards_[sample.unit]);
    if (!path || !sample.image_offset)
      throw IoError("shard " + log_name(sample.unit) + " cannot be read again", EINVAL);
    return formats::read_file_range(*path, *sample.image_offset, sample.image_bytes);
  }

  // Opens the shard; while the process is out of descriptors (peers
  // holding connections open, say), waits and tries again rather than call
  // the shard unreadable: an epoch must not come up empty for that.
  formats::ShardReader open_reader(const std::string& shard, const formats::ShardReaderOptions& options) const {
    for (int attempt = 1;; ++attempt) {
      try {
        return formats::ShardReader(shard, options);
      } catch (const IoError& e) {
        const bool out_of_descriptors = e.code() == EMFILE || e.code() == ENFILE;
        if (!out_of_descriptors || attempt == kDescriptorAttempts || (cancelled_ && cancelled_())) throw;
      }
      std::this_thread::sleep_for(kDescriptorRetryDelay);
    }
  }

 private:
  static constexpr int kDescriptorAttempts = 30;
  static constexpr std::chrono::milliseconds kDescriptorRetryDelay{500};

  // The shard for the server's own messages: a URL without its user,
  // password and query (logs travel further than the command line).
  std::string log_name(std::size_t unit) const {
    const std::string& shard = shards_[unit];
    return formats::is_http_shard(shard) ? formats::public_shard_name(shard, unit) : shard;
  }

  std::vector<std::string> shards_;
  std::uint64_t max_image_bytes_;
  std::function<bool()> cancelled_;
};

class FolderSource final : public SampleSource {
 public:
  FolderSource(formats::ImageFolder folder, std::uint64_t max_image_bytes)
      : folder_(std::move(folder)), max_image_bytes_(max_image_bytes) {}

  std::size_t units() const noexcept override { return folder_.images.size(); }
  const char* unit_name() const noexcept override { return "images"; }
  std::string unit_label(std::size_t unit) const override { return folder_.images[unit].file.string(); }

  std::optional<std::string> read(std::size_t unit, const std::function<bool(RawSample)>& take, bool images_later,
                                  const std::function<bool()>& /*abandoned: a file is never remote*/) override {
    const formats::FolderImage& image = folder_.images[unit];
    RawSample sample;
    sample.key = image.file.string();
    sample.shard = sample.key;
    sample.known_label = image.label;
    try {
      if (images_later) {
        sample.image_bytes = RegularFile(image.file, "image").size();
        if (sample.image_bytes > max_image_bytes_) std::swap(sample.oversized_image, sample.image_bytes);
        if (!sample.oversized_image) sample.image_offset = 0;
      } else if (formats::FileContents contents = formats::read_file(image.file, max_image_bytes_);
                 contents.over_limit) {
        sample.oversized_image = contents.size;
      } else {
        sample.image_bytes = contents.bytes.size();
        sample.image = std::move(contents.bytes);
      }
    } catch (const IoError& e) {
      sample.unreadable = e.what();
    }
    (void)take(std::move(sample));
    return std::nullopt;
  }

  ByteBuffer read_image(const RawSample& sample) const override {
    return formats::read_file_range(folder_.images[sample.unit].file, 0, sample.image_bytes);
  }

 private:
  formats::ImageFolder folder_;
  std::uint64_t max_image_bytes_;
};

}  // namespace

std::unique_ptr<SampleSource> shard_source(std::vector<std::string> shards, std::uint64_t max_image_bytes,
                                           std::function<bool()> cancelled) {
  return std::make_unique<ShardSource>(std::move(shards), max_image_bytes, std::move(cancelled));
}

std::unique_ptr<SampleSource> folder_source(formats::ImageFolder folder, std::uint64_t max_image_bytes) {
  return std::make_unique<FolderSource>(std::move(folder), max_image_bytes);
}

}  // namespace tensorcom::pipeline
