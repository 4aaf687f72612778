#include "image_server.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "batch_assembler.h"
#include "bounded_queue.h"
#include "shard_reader.h"
#include "skip_counter.h"
#include "tensorcom/metadata.h"

namespace tensorcom::pipeline {

namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_stop{false};

extern "C" void request_stop(int) { g_stop = true; }

bool has_image_extension(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".ppm";
}

std::string default_server_id() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(::getpid());
}

// The label of a sample, or why it has none usable.
struct Label {
  std::int32_t value = 0;
  std::string problem;  // empty when value is good
  std::string detail;
};

Label label_of(const RawSample& sample, std::int32_t classes) {
  if (sample.known_label) return {*sample.known_label, {}, {}};
  if (!sample.label) return {0, "missing label", "no .cls member"};
  std::string_view text = *sample.label;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return {0, "bad label", "cls is '" + std::string(text.substr(0, 40)) + "'"};
  }
  if (value < 0 || value > INT32_MAX || (classes > 0 && value >= classes)) {
    return {0, "label out of range", std::to_string(value)};
  }
  return {static_cast<std::int32_t>(value), {}, {}};
}

// The file's bytes; nothing (and its size in `size`) if it is larger than limit.
std::optional<ByteBuffer> read_file(const std::string& path, std::uint64_t limit, std::uint64_t& size) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw IoError("cannot open '" + path + "'", errno);
  size = static_cast<std::uint64_t>(in.tellg());
  if (size > limit) return std::nullopt;
  ByteBuffer out(static_cast<std::size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()))) {
    throw IoError("cannot read '" + path + "'", errno);
  }
  return out;
}

class ImageServer {
 public:
  ImageServer(const ImageServerOptions& options, const SampleSourceSpec& source)
      : options_(options),
        source_(source),
        queue_(4 * static_cast<std::size_t>(std::max(options.workers, 1)) + options.format.batch_size),
        assembler_(options.format, batch_buffers(options)),
        skips_(options.program),
        server_id_(options.server_id.empty() ? default_server_id() : options.server_id),
        connection_(options.addresses, options.connection) {}

  int run();

 private:
  static std::size_t batch_buffers(const ImageServerOptions& o) {
    if (o.max_batches) return o.max_batches;
    std::size_t in_flight = 2 + 2 * static_cast<std::size_t>(o.workers) / o.format.batch_size;
    return std::max<std::size_t>(in_flight + static_cast<std::size_t>(o.connection.send_high_water_mark), 4);
  }

  std::size_t unit_count() const { return source_.shards.empty() ? source_.images.size() : source_.shards.size(); }

  void read_all();
  bool read_unit(std::size_t unit, ShuffleBuffer<RawSample>& buffer);
  bool emit(RawSample sample);
  void work();
  void publish();
  bool send(const TensorList& batch);
  void report() const;
  void summary(double seconds) const;

  const ImageServerOptions& options_;
  const SampleSourceSpec& source_;
  BoundedQueue<RawSample> queue_;
  BatchAssembler assembler_;
  SkipCounter skips_;
  std::string server_id_;
  Connection connection_;
  std::uint64_t sequence_ = 0;  // samples emitted; reader thread only
  std::atomic<std::uint64_t> shard_errors_{0};
  std::atomic<std::uint64_t> jpegs_sliced_{0};  // added by each worker as it ends
  std::atomic<std::uint64_t> jpegs_total_{0};
  std::atomic<bool> failed_{false};  // the data held nothing to serve
  std::uint64_t samples_sent_ = 0;
  std::uint64_t batches_sent_ = 0;
};

void ImageServer::read_all() {
  for (std::uint64_t epoch = 0; options_.epochs == 0 || epoch < options_.epochs; ++epoch) {
    const std::uint64_t epoch_start = sequence_;
    ShuffleBuffer<RawSample> buffer(options_.shuffle_buffer, seeded_rng({options_.order.seed, epoch, 3}));
    for (std::size_t unit : epoch_units(unit_count(), epoch, options_.order)) {
      if (!read_unit(unit, buffer)) return;
    }
    // An epoch ends with all of its samples out: none is carried over.
    while (auto sample = buffer.drain()) {
      if (!emit(std::move(*sample))) return;
    }
    if (sequence_ == epoch_start) {
      // Serving forever from nothing would only spin.
      std::cerr << options_.program << ": epoch " << epoch << " found no samples; stopping\n";
      failed_ = true;
      return;
    }
  }
}

bool ImageServer::read_unit(std::size_t unit, ShuffleBuffer<RawSample>& buffer) {
  auto pass_on = [&](RawSample sample) {
    auto out = buffer.add(std::move(sample));
    return !out || emit(std::move(*out));
  };
  if (source_.shards.empty()) {
    const FolderImage& image = source_.images[unit];
    RawSample sample;
    sample.key = image.path;
    sample.shard = image.path;
    sample.known_label = image.label;
    try {
      std::uint64_t size = 0;
      if (auto bytes = read_file(image.path, options_.max_image_bytes, size)) {
        sample.image = std::move(*bytes);
        sample.image_extension = fs::path(image.path).extension().string().substr(1);
      } else {
        sample.oversized_image = size;
      }
    } catch (const IoError& e) {
      skips_.skip("unreadable file", image.path, image.path, e.what());
      return !g_stop;
    }
    return pass_on(std::move(sample));
  }
  const std::string& shard = source_.shards[unit];
  try {
    ShardReader reader(shard, ShardReaderOptions{.max_member_bytes = options_.max_image_bytes});
    while (auto sample = reader.next()) {
      if (g_stop || !pass_on(std::move(*sample))) return false;
    }
    if (reader.error()) {
      ++shard_errors_;
      std::cerr << options_.program << ": shard " << shard << " ended early: " << *reader.error() << '\n';
    }
  } catch (const IoError& e) {
    ++shard_errors_;
    std::cerr << options_.program << ": skipping shard: " << e.what() << '\n';
  }
  return !g_stop;
}

bool ImageServer::emit(RawSample sample) {
  sample.sequence = sequence_++;
  return queue_.push(std::move(sample));
}

void ImageServer::work() {
  ImageAugmenter augmenter(options_.augment);
  std::vector<std::uint8_t> scratch(assembler_.format().direct() ? 0 : assembler_.format().image_bytes());
  while (auto sample = queue_.pop()) {
    if (sample->oversized_image) {
      skips_.skip("too large", sample->key, sample->shard,
                  "image of " + std::to_string(sample->oversized_image) + " bytes; the limit is " +
                      std::to_string(options_.max_image_bytes));
      continue;
    }
    Label label = label_of(*sample, options_.classes);
    if (!label.problem.empty()) {
      skips_.skip(label.problem, sample->key, sample->shard, label.detail);
      continue;
    }
    if (sample->image.empty()) {
      skips_.skip(sample->image_extension.empty() ? "no image" : "empty", sample->key, sample->shard, "");
      continue;
    }
    auto slot = assembler_.acquire();
    if (!slot) break;  // cancelled
    auto rng = seeded_rng({options_.order.seed, sample->sequence, 2});
    try {
      augmenter.augment(sample->image, sample->image_extension, rng, slot->direct ? slot->direct : scratch.data());
      assembler_.commit(*slot, scratch.data(), label.value, std::move(sample->key), std::move(sample->shard));
    } catch (const SampleError& e) {
      assembler_.abandon(*slot);
      skips_.skip(e.reason(), sample->key, sample->shard, e.what());
    } catch (const std::exception& e) {
      assembler_.abandon(*slot);
      skips_.skip("undecodable", sample->key, sample->shard, e.what());
    }
  }
  jpegs_sliced_ += augmenter.jpeg_counts().sliced;
  jpegs_total_ += augmenter.jpeg_counts().total;
}

bool ImageServer::send(const TensorList& batch) {
  try {
    connection_.send(batch);
    return true;
  } catch (const TransportError& e) {
    if (e.code() == EINTR && g_stop) return false;
    throw;
  }
}

void ImageServer::publish() {
  while (auto batch = assembler_.next_ready()) {
    TensorList list{batch->images, batch->labels};
    if (options_.format.metadata) {
      list.push_back(metadata_tensor({std::move(batch->keys), std::move(batch->shards), server_id_, batches_sent_}));
    }
    if (!send(list)) return;
    ++batches_sent_;
    samples_sent_ += static_cast<std::uint64_t>(batch->labels.dim(0));
    if (options_.report && batches_sent_ % options_.report == 0) report();
  }
}

void ImageServer::report() const {
  std::cout << options_.program << ": " << batches_sent_ << " batches, " << samples_sent_ << " images; "
            << connection_.stats().summary() << "; skipped " << skips_.total() << std::endl;
}

void ImageServer::summary(double seconds) const {
  std::cout << options_.program << ": done: served " << samples_sent_ << " samples in " << batches_sent_
            << " batches in " << seconds << " s (" << (seconds > 0 ? samples_sent_ / seconds : 0.0)
            << " images/s); skipped: " << skips_.summary() << "; shard errors: " << shard_errors_
            << "; JPEGs cut at restart markers: " << jpegs_sliced_ << " of " << jpegs_total_ << std::endl;
  // Most of a crop's decoding time is entropy decoding of rows it does not
  // need; restart markers let the server skip it. Say how to get them.
  if (jpegs_total_ > 0 && jpegs_sliced_ * 2 < jpegs_total_) {
    std::cout << options_.program << ": hint: most JPEGs had no restart markers to cut crops at; "
              << "'make-shards --from-shards PATTERN --restart-markers' rewrites shards losslessly "
              << "so that crops decode faster" << std::endl;
  }
}

int ImageServer::run() {
  std::cout << options_.program << ": " << unit_count() << (source_.shards.empty() ? " images" : " shards")
            << ", " << options_.workers << " workers, batches of " << options_.format.batch_size << " on "
            << connection_.describe();
  for (const std::string& bound : connection_.bound_addresses()) std::cout << " [bound " << bound << "]";
  std::cout << std::endl;

  const auto start = std::chrono::steady_clock::now();
  std::thread reader([this] {
    read_all();
    queue_.close();
  });
  std::vector<std::thread> workers;
  for (int i = 0; i < std::max(options_.workers, 1); ++i) workers.emplace_back([this] { work(); });
  std::thread finisher([&] {
    reader.join();
    for (auto& w : workers) w.join();
    assembler_.finish();
  });
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    // Signals cannot wake condition variables: look for them here.
    while (!done && !g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (g_stop) {
      queue_.close();
      assembler_.cancel();
    }
  });
  auto stop_threads = [&] {
    done = true;
    queue_.close();
    assembler_.cancel();
    finisher.join();
    watcher.join();
  };
  try {
    publish();
  } catch (...) {
    stop_threads();
    throw;
  }
  stop_threads();
  summary(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return failed_ ? 1 : 0;
}

}  // namespace

std::vector<FolderImage> list_image_folder(const std::string& dir) {
  std::vector<std::string> classes;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_directory()) classes.push_back(entry.path().filename().string());
  }
  if (error) throw IoError("cannot list '" + dir + "'", error.value());
  std::sort(classes.begin(), classes.end());
  std::vector<FolderImage> images;
  for (std::size_t label = 0; label < classes.size(); ++label) {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(fs::path(dir) / classes[label])) {
      if (entry.is_regular_file() && has_image_extension(entry.path())) files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    for (std::string& file : files) images.push_back({std::move(file), static_cast<std::int32_t>(label)});
  }
  if (images.empty()) throw IoError("no images under '" + dir + "' (expected DIR/CLASS/*.jpg)", ENOENT);
  return images;
}

int run_image_server(const ImageServerOptions& options, const SampleSourceSpec& source) {
  if (source.shards.empty() && source.images.empty()) throw ArgumentError("nothing to serve: no shards or images");
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  ImageServer server(options, source);
  return server.run();
}

}  // namespace tensorcom::pipeline
