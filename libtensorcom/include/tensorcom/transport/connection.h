// Connection: sends and receives batches (lists of tensors) over ZeroMQ,
// addressed by tensorcom URLs (see url.h). Several URLs share one socket:
// receives fair-queue across them, sends go round-robin (PUSH) or to every
// subscriber (PUB).
//
//   tensorcom::Connection in({"zsub://127.0.0.1:7880"});
//   for (tensorcom::TensorList& batch : in) train(batch[0], batch[1]);
//
// Received tensors are zero-copy views of the received message; sent tensors
// are not copied: ZeroMQ reads their memory and releases their owners when it
// is done. Thread safety: one thread at a time per Connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorcom/transport/curve.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/transport/stats.h"
#include "tensorcom/codec/compressed_images.h"
#include "tensorcom/codec/tenbin.h"
#include "tensorcom/transport/url.h"

namespace tensorcom {

namespace detail {
struct ConnectionAccess;
}

enum class Framing {
  kMultipart,     // two frames a tensor (the reference's default)
  kSingleBuffer,  // one frame holding the .ten encoding of the batch
};

using Milliseconds = std::chrono::milliseconds;

// Writes `line` and a newline to stderr: where a Connection's messages go
// unless ConnectionOptions::log says otherwise.
void log_to_stderr(std::string_view line);

// Options are grouped as LevelDB's options.h groups them: what the
// connection does, then what bounds it, then how fast it goes. Each field
// has its default in place.
struct ConnectionOptions {
  // ---- Behaviour: what the connection does ----

  Framing framing = Framing::kMultipart;  // how send() frames; receiving detects either
  std::optional<Milliseconds> timeout;    // how long iteration waits before TimeoutError (none: forever)
  std::uint64_t epoch = 100000;           // batches per epoch: what size() reports
  std::int64_t total = -1;                // iteration stops after this many batches (-1: never)
  std::optional<std::string> topic;       // SUB subscription; overrides the URL's #fragment
  bool expand_braces = true;              // false: each URL is taken literally (the reference's noexpand)
  // PUB: send() waits for a subscriber when there is none, instead of
  // handing ZeroMQ a batch it would drop (a server that waits costs no CPU
  // and loses no data). False: such batches are counted as dropped.
  bool await_subscriber = false;
  // PUB: a subscriber whose queue is full (send_high_water_mark) makes
  // send() wait for it instead of missing the batch (ZMQ_XPUB_NODROP):
  // every subscriber gets every batch, at the slowest one's pace.
  bool publish_no_drop = false;
  // Receivers: confirm each batch whose metadata asks for it, when recv()
  // hands it over, and drop copies of a batch already taken (a confirming
  // sender re-sends what a lost connection may have dropped; see
  // tensorcom/transport/delivery.h). Also warns once when one stream comes
  // from two servers at once.
  bool confirm_delivery = true;
  // Receivers: one stream (same name and fingerprint, carried by --meta)
  // coming from two servers at once makes recv() throw TransportError,
  // naming both, for that batch and every one after, instead of a warning:
  // the trainer would get every batch twice.
  bool refuse_duplicate_streams = false;
  Milliseconds heartbeat{0};          // ZMTP heartbeat interval (0: none)
  Milliseconds heartbeat_timeout{0};  // peer dropped after this silence (0: 10 x heartbeat)
  // Reconnect delay while a peer is absent (not yet started, or gone), and
  // its back-off limit (0: none, every attempt after `reconnect`): a trainer
  // started before its server gets the first batch within ~reconnect of the
  // server binding, as with ZeroMQ's defaults.
  Milliseconds reconnect{100};
  Milliseconds reconnect_max{0};
  Milliseconds linger{2000};  // how long close waits to deliver queued batches
  // CURVE encryption and authentication of every peer (see curve.h and
  // docs/security.md). Nothing: plain text, any peer (ZeroMQ's NULL).
  std::optional<CurveSecurity> curve;
  // Receives every line the library writes (a malformed message skipped,
  // serve()'s rate lines), without its newline, on the thread that called
  // recv() or serve(). Empty: the lines are dropped.
  std::function<void(std::string_view)> log = log_to_stderr;

  // ---- Bounds: what a peer may make it hold ----

  // Receiving sockets: larger frames are refused by ZeroMQ before it
  // allocates them, larger messages are dropped and counted (-1: no limit).
  // See docs/security.md for what an unauthenticated peer can still make
  // ZeroMQ buffer.
  std::int64_t max_message_size = std::int64_t{2} << 30;
  DecodeLimits limits;  // bounds on what a received header may declare
  // Received batches of compressed images (servers' --wire jpeg,
  // compressed_images.h) are decoded to the images they declare, on this
  // many threads, at most max_bytes of images a batch; 0 threads: handed
  // on compressed (tenbin record keeps them so).
  int decompress_threads = 2;
  DecompressLimits decompress_limits;

  // ---- Performance: how much it queues and keeps ----

  // Batches queued for sending, per peer: ZeroMQ's (and the reference's)
  // count, so that a burst of small batches over PUB is not dropped;
  // queue_bytes lowers it for large batches.
  int send_high_water_mark = 1000;
  // Batches queued on receipt, per peer: a trainer that is slow to start
  // takes in no more; the sender's queue holds the rest, so nothing is
  // dropped meanwhile.
  int receive_high_water_mark = 8;
  // Bytes a sender's queue may hold, per peer: sends lower the send
  // high-water mark to max(2, queue_bytes / the largest batch's bytes), never
  // raise it (ZeroMQ cannot safely grow a queue that is full). 0: the count
  // alone.
  std::int64_t queue_bytes = std::int64_t{256} << 20;
  // Keep large receive buffers mapped between messages: without it every
  // batch is freshly mapped and faulted in. Process-wide, see Connection's
  // constructor. What is kept is given back to the system when the
  // receiver has waited a second for a message, after it drops an
  // oversized message, and when it closes. A sender does the same from
  // its first send that copies a large batch (single-buffer framing, or a
  // tensor without an owner): each copy would be faulted in afresh too.
  bool reuse_receive_memory = true;
  std::size_t stats_horizon = 1000;  // batches the recent rates cover
};

// Malformed messages seen by a receiving Connection, by kind.
struct MalformedCounts {
  std::map<FormatErrorKind, std::uint64_t> by_kind;  // e.g. kOddFrameCount -> 3
  [[nodiscard]] std::uint64_t total() const noexcept;
  // by_kind keyed by format_error_kind_name(): {"odd frame count": 3}.
  [[nodiscard]] std::map<std::string, std::uint64_t> by_name() const;
};

class Connection {
 public:
  // Expands, parses and binds/connects every URL on one socket.
  // Throws UrlError for a bad URL, TransportError if ZeroMQ refuses one.
  // A receiving (PULL or SUB) Connection with options.reuse_receive_memory
  // sets process-wide malloc options, once per process, before ZeroMQ starts
  // its threads: no mmap for large blocks (M_MMAP_MAX 0), the heap trimmed
  // only when 1 GiB at its top is free (M_TRIM_THRESHOLD), one arena for
  // every thread (M_ARENA_MAX 1). ZeroMQ mallocs every received message; without these
  // glibc maps each large batch afresh and unmaps it on free, and faulting
  // its pages in again bounds throughput (see src/malloc_tuning.cc). The
  // heap kept that way is trimmed (malloc_trim) when a receiver idles for a
  // second, drops an oversized message, or closes: retention is bounded by
  // what a busy receiver's messages occupy.
  explicit Connection(std::span<const std::string> urls, ConnectionOptions options = {});
  Connection(std::initializer_list<std::string> urls, ConnectionOptions options = {});
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  // Receives one batch. Waits at most timeout (none: forever); returns
  // nothing if no valid batch came in time. Malformed messages are counted,
  // reported once per kind through options().log, and skipped. The time
  // spent waiting is added to stats().blocked_seconds().
  // Throws TransportError (code() EINTR when a signal interrupted the wait);
  // REQUIRES a PULL or SUB connection.
  [[nodiscard]] std::optional<TensorList> recv(std::optional<Milliseconds> timeout = std::nullopt);

  // Sends one batch without copying tensor data; the tensors' owners are held
  // until ZeroMQ has written them. PUSH: blocks while every peer's
  // high-water mark is reached. PUB: never blocks for a slow subscriber
  // (ZeroMQ drops the batch for a subscriber whose queue is full: PUB's
  // contract, so that one slow peer cannot stall the others); with no
  // subscriber at all, waits for one (options().await_subscriber) or counts
  // the batch in dropped_without_subscriber() and does not send it.
  // Returns: true if the batch was handed to ZeroMQ (and counted in stats()).
  // Throws TransportError (code() EINTR when a signal interrupted a wait);
  // REQUIRES a PUSH or PUB connection.
  bool send(std::span<const Tensor> batch);
  // The same, framed as `framing` says instead of options().framing.
  bool send(std::span<const Tensor> batch, Framing framing);
  // What try_send() did with a batch.
  enum class Sent {
    kYes,           // handed to ZeroMQ, counted in stats()
    kNoSubscriber,  // PUB, none subscribed: counted in dropped_without_subscriber()
    kWouldBlock,    // nothing sent: send() would have blocked here
  };
  // Sends as send() does, but never blocks: where send() would wait (a PUSH
  // whose receivers are all gone or full, a PUB with publish_no_drop whose
  // subscriber is full, a PUB awaiting a subscriber) it sends nothing and
  // returns kWouldBlock. A sender that must notice a stop request sends
  // with send_until_stopped() (connection_controls.h), which waits in slices
  // and sends with this: a receiver leaving between a wait and the send
  // cannot then hold it in a send that no signal ends.
  // Throws TransportError; REQUIRES a PUSH or PUB connection.
  [[nodiscard]] Sent try_send(std::span<const Tensor> batch);
  // The same, framed as `framing` says instead of options().framing.
  [[nodiscard]] Sent try_send(std::span<const Tensor> batch, Framing framing);

  // Binds or connects more URLs on the same socket (expanded as the
  // constructor's). Throws UrlError for a bad URL or one that cannot share
  // this socket (another kind, or another SUB topic), TransportError if
  // ZeroMQ refuses one or the connection is closed.
  void connect(std::span<const std::string> urls);

  // Closes the socket. Queued outgoing batches get up to options().linger
  // to leave (over ipc, to be read by the receiver, not just written to
  // its socket: one whose queue is full would drop the rest when the
  // sender's end closed), but only if some peer is connected (a connect in progress gets
  // a quarter second to complete): a sender that has none (a server never
  // found, receivers that have all gone, a program interrupted before
  // anything happened) or sent nothing, and every receiver, closes at once. Afterwards
  // send() and recv() throw TransportError; stats(), options(), endpoints()
  // stay readable. Idempotent; the destructor closes.
  void close();
  [[nodiscard]] bool closed() const noexcept;

  // Sends every batch next() yields until it yields nothing; logs the
  // reference's "count N rate ..." line (options().log) every report batches
  // (0: never). Returns the number of batches sent.
  std::uint64_t serve(const std::function<std::optional<TensorList>()>& next, std::uint64_t report = 0);

  // The endpoints as parsed, and for binding ones the address actually bound
  // (a port 0 or * replaced by the port the system chose).
  [[nodiscard]] const std::vector<Endpoint>& endpoints() const noexcept;
  [[nodiscard]] std::vector<std::string> bound_addresses() const;
  // The URLs, joined with ", ", for messages.
  [[nodiscard]] std::string describe() const;

  // Batches sent or received, and the time recv() spent waiting for them
  // (Statistics::blocked_seconds). The mutable one is for reset().
  [[nodiscard]] const Statistics& stats() const noexcept;
  [[nodiscard]] Statistics& stats() noexcept;
  [[nodiscard]] const MalformedCounts& malformed() const noexcept;
  [[nodiscard]] const ConnectionOptions& options() const noexcept;
  // The error iteration throws when every peer was silent past
  // options().timeout, naming the timeout and the URLs: the one rule for
  // every receiving loop (C++ iteration, Python's).
  [[nodiscard]] TimeoutError silence_error() const;

  // Settings changed after construction (pyzmq code's setsockopt); they
  // apply to peers already connected (high-water marks: best while their
  // queues are not full, as with ZeroMQ). Throws TransportError if closed.
  void set_timeout(std::optional<Milliseconds> timeout);
  void set_linger(Milliseconds linger);
  void set_high_water_marks(int send, int receive);

  // Batches per epoch (options().epoch), for frameworks that want a length.
  [[nodiscard]] std::uint64_t size() const noexcept;

  // Range-for over received batches: stops after options().total batches;
  // throws TimeoutError naming the URLs when every peer is silent past
  // options().timeout.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = TensorList;
    using difference_type = std::ptrdiff_t;
    using pointer = TensorList*;
    using reference = TensorList&;

    Iterator() = default;
    explicit Iterator(Connection* connection);
    reference operator*() { return current_; }
    pointer operator->() { return &current_; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(const Iterator& other) const noexcept { return connection_ == other.connection_; }

   private:
    void fetch();
    Connection* connection_ = nullptr;
    TensorList current_;
    std::int64_t received_ = 0;
  };
  [[nodiscard]] Iterator begin() { return Iterator(this); }
  [[nodiscard]] Iterator end() { return Iterator(); }

 private:
  class Impl;
  friend struct detail::ConnectionAccess;  // connection_controls.h's functions
  std::unique_ptr<Impl> impl_;
};

// The batch size of a batch: the first dimension of its first tensor (1 for
// a 0-d tensor, 0 for an empty list), or the images of the compressed
// images it starts with (compressed_images.h).
[[nodiscard]] std::uint64_t batch_size(std::span<const Tensor> batch) noexcept;
// Payload bytes of a batch.
[[nodiscard]] std::uint64_t batch_bytes(std::span<const Tensor> batch) noexcept;

}  // namespace tensorcom
