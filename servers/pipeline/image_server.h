// The augmentation server behind serve-imagenet-shards and serve-imagenet-dir:
// a reader thread (EpochReader) walks the epoch's shards or files through a
// shuffle buffer, worker threads (SlotFiller) decode and augment into batch
// slots of a BatchAssembler, and the calling thread publishes complete
// batches on a Connection (BatchPublisher); ServerCounters counts and
// reports, through a ServerLog. This file puts them together.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "batch_format.h"
#include "resume_token.h"
#include "sample_order.h"
#include "sample_source.h"
#include "server_log.h"
#include "size_schedule.h"
#include "tensorcom/transport/connection.h"
#include "tensorcom/imaging/augmenter.h"
#include "tensorcom/codec/compressed_images.h"
#include "tensorcom/imaging/batch_mix.h"

namespace tensorcom::pipeline {

struct ImageServerOptions {
  std::string program = "serve-imagenet";  // prefix of every line it prints
  // Where its lines go (ServerLog): empty sinks write progress to stdout
  // and warnings to stderr.
  ServerLog::Sink progress;
  ServerLog::Sink warnings;
  std::vector<std::string> addresses;  // URLs to serve on (brace-expanded); at least one
  BatchFormat format;                  // format.size: every epoch's size, unless size_schedule is set
  // The images' size by epoch (FFCV's progressive resizing). With it, every
  // epoch's batches end with the epoch (its last may be short), so that a
  // batch holds one epoch and one size; format.size is ignored.
  std::optional<SizeSchedule> size_schedule;
  imaging::AugmentOptions augment;
  // MixUp/CutMix over each complete batch (batch_mixer.h); unset: none.
  std::optional<imaging::MixOptions> mix;
  // The augmentation flags as given (flag, value, ...), sent in --meta for
  // trainers to check against their recipe.
  std::vector<std::string> recipe;
  // How images go on the wire: raw, or each compressed (--wire jpeg, on
  // `workers` threads after mixing).
  WireFormat wire;
  OrderOptions order;
  std::size_t shuffle_buffer = 1000;  // samples mixed across shards (0: none)
  int workers = 1;                    // decoding threads
  std::uint64_t epochs = 0;           // passes over the data (0: forever)
  // Samples each epoch, in batches: the share cut or repeated to exactly
  // this many batches (see EpochQuota). 0: the share as it is.
  std::uint64_t epoch_batches = 0;
  // Repeated augmentation (order.repeats > 1): without epoch_batches, each
  // rank's epoch takes (dataset_samples rounded down to ra_round) / world
  // samples, as RASampler and RepeatAugSampler count (ra_round 0:
  // ceil(dataset_samples / world), timm's selected_round=0). dataset_samples
  // 0: the source's images, where its units are images. epoch_samples: the
  // count run_image_server works out.
  std::uint64_t dataset_samples = 0;
  std::uint64_t ra_round = 256;
  std::uint64_t epoch_samples = 0;
  // PUB: the first batch waits for this many subscribers, and a subscriber
  // whose queue is full holds the sender back instead of missing batches
  // (every rank sees every sample). 0: send once one subscribes; drop for
  // slow ones.
  std::uint64_t subscribers = 0;
  std::uint64_t report = 10;  // a rate line every N batches (0: never)
  // The reference's --benchmark: serve the first batch over and over until
  // stopped, the readers and workers stopped, to measure the transport alone.
  bool repeat_first_batch = false;
  std::int32_t classes = 0;                                  // labels must be below this (0: any non-negative int32)
  std::uint64_t max_image_bytes = std::uint64_t{256} << 20;  // larger encoded images are skipped unread
  bool image_bytes_fit_memory = false;  // max_image_bytes was lowered to fit memory_limit (memory_budget.h)
  // Remote shards (http(s) URLs, pipe: commands) read at once ahead of the
  // current one (ReadAheadSource), within an eighth of the memory limit.
  std::size_t read_ahead = 3;
  std::size_t max_batches = 0;  // batch buffers in memory (0: 2 + 2 x workers / batch, at least 4)
  // Bytes of encoded samples the server holds in all, from reading to
  // decoding (shared as memory_budget.h says); the shuffle buffer passes
  // samples on early rather than exceed its share. 0: an eighth of the
  // machine's memory, at most 4 GiB (default_memory_limit()).
  std::uint64_t memory_limit = 0;
  std::string server_id;  // in metadata; hostname:pid when empty
  // The stream's name in metadata and resume tokens, stable across restarts;
  // empty: "RANK/WORLD" of `order`.
  std::string stream;
  // A resume token (JSON) to resume from: its epochs and batches consumed
  // are not served again. Empty: start at epoch 0.
  std::string resume_path;
  StreamResume resume;  // set from resume_path by run_image_server
  // false: order.seed was drawn at start (a resume then takes the token's).
  bool seed_given = true;
  ConnectionOptions connection;
  // PUSH with --meta: batches are kept until a receiver confirms them and
  // sent again after a lost connection; at the end the server waits at most
  // delivery_timeout for the last receipts and fails if some never came.
  // unconfirmed: sent as PUSH does, for receivers that never confirm.
  bool unconfirmed = false;
  Milliseconds delivery_timeout{60000};
  // A server that connects to its receivers waits this long for one before
  // the first batch (0: no wait).
  Milliseconds wait_for_receiver{120000};
  // HOST:PORT to serve Prometheus metrics on (port 0: any free port; the
  // bound URL is printed). Empty: no metrics endpoint.
  std::string metrics_address;
  // Seconds to keep answering scrapes after serving ends, so that the last
  // values are collected (a stop signal ends the wait).
  double metrics_hold_s = 0;
  // Polled (every 50 ms and between samples): true ends serving early, with
  // a summary. Empty: serve until the epochs are done.
  std::function<bool()> should_stop;
};

// The stream's name: options.stream, or "RANK/WORLD".
[[nodiscard]] std::string stream_name(const ImageServerOptions& options);
// The stream's name, fingerprint, seed and --epoch-batches, as batches carry
// them and resume tokens must match them.
[[nodiscard]] StreamIdentity stream_identity(const ImageServerOptions& options, const SampleSource& source);

// An eighth of the machine's physical memory, between 64 MiB and 4 GiB.
[[nodiscard]] std::uint64_t default_memory_limit();
// The memory limit a server runs under: options.memory_limit, or the default.
[[nodiscard]] std::uint64_t memory_limit_of(const ImageServerOptions& options);
// Lowers options.max_image_bytes to what the memory limit leaves one image
// (memory_budget.h): a larger one is passed over unread, as one over
// --max-image-bytes is. Says so in options.image_bytes_fit_memory.
void fit_images_to_memory(ImageServerOptions& options);

// Serves source's samples until the epochs are done or should_stop; writes
// report lines and a summary to options.progress. Returns the exit status: 1 if an
// epoch found no sample to serve, else 0. Throws ArgumentError for options
// or a source that cannot serve, TransportError from the connection.
// The exit status of a server whose batches did not all reach a receiver
// that confirmed them (after --delivery-timeout).
inline constexpr int kExitUndelivered = 3;

int run_image_server(const ImageServerOptions& options, SampleSource& source);

}  // namespace tensorcom::pipeline
