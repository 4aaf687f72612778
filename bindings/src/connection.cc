// tensorcom::Connection for Python. Blocking calls run without the GIL and
// under the connection's own lock (a Connection is one-thread-at-a-time); a
// signal that interrupts a wait runs Python's handlers, so Ctrl-C raises
// KeyboardInterrupt instead of leaving the program stuck in recv.
#include "tensorcom/transport/connection.h"
#include "tensorcom/transport/connection_controls.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "tensorcom/metrics/metrics_server.h"
#include "tensorcom/metrics/receiver_metrics.h"

namespace tensorcom::python {

Milliseconds to_milliseconds(double seconds, const char* name) {
  // A billion seconds (31 years) is forever enough, and far from overflow.
  constexpr double kMostSeconds = 1e9;
  if (!std::isfinite(seconds) || seconds < 0 || seconds > kMostSeconds) {
    throw ArgumentError(std::string(name) + " must be a number of seconds in 0..1e9, not " + std::to_string(seconds));
  }
  return Milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000.0)));
}

std::optional<Milliseconds> to_timeout(std::optional<double> seconds) {
  if (!seconds) return std::nullopt;
  return to_milliseconds(*seconds, "timeout");
}

namespace {

using Clock = std::chrono::steady_clock;

class PyConnection final : public SharedConnection {
 public:
  PyConnection(const std::vector<std::string>& urls, ConnectionOptions options)
      : connection_(urls, std::move(options)) {}
  PyConnection(const PyConnection&) = delete;
  PyConnection& operator=(const PyConnection&) = delete;
  ~PyConnection() { close(); }

  // Closing may wait up to the linger time for queued batches to leave (see
  // Connection::close), and ZeroMQ's I/O thread may need the GIL to release
  // sent arrays meanwhile. The statistics stay readable.
  void close() {
    without_gil([&] {
      std::lock_guard lock(mutex_);
      connection_.close();
    });
    release_put_aside();
  }

  [[nodiscard]] bool closed() const noexcept { return connection_.closed(); }

  void connect(const std::vector<std::string>& urls) {
    std::lock_guard lock(mutex_);
    connection_.connect(urls);
  }

  // Nothing if no batch came within timeout (none: wait forever).
  std::optional<TensorList> recv(std::optional<Milliseconds> timeout) {
    const auto start = Clock::now();
    for (;;) {
      std::optional<Milliseconds> left = timeout;
      if (timeout)
        left = std::max(Milliseconds(0), *timeout - std::chrono::duration_cast<Milliseconds>(Clock::now() - start));
      release_put_aside();
      try {
        return without_gil([&] {
          std::lock_guard lock(mutex_);
          std::optional<TensorList> batch = get().recv(left);
          if (metrics_server_) metrics_.update(connection_);
          return batch;
        });
      } catch (const TransportError& e) {
        if (e.code() != EINTR) throw;
      }
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }

  // The next batch of an iteration: TimeoutError after options().timeout.
  TensorList next() {
    const std::optional<Milliseconds> timeout = get().options().timeout;
    std::optional<TensorList> batch = recv(timeout);
    if (!batch) throw get().silence_error();
    return std::move(*batch);
  }

  // copy: ZeroMQ gets copies of the arrays, made before send returns (the
  // caller's arrays are alive until then), so the caller may refill them.
  // Otherwise it reads the arrays themselves, later, holding them alive.
  // A send that must wait (no receiver, full queues, no subscriber yet)
  // waits in slices, the connection's lock taken for one slice at a time:
  // close() from another thread then ends it within a slice (the send
  // throws TransportError: closed), and Ctrl-C is seen between slices.
  void send(const TensorList& batch, std::optional<bool> multipart, bool copy) {
    constexpr Milliseconds kSlice{100};
    release_put_aside();
    const TensorList views = copy ? borrowed_views(batch) : TensorList();
    const TensorList& sent = copy ? views : batch;
    for (;;) {
      const bool done = without_gil([&] {
        std::lock_guard lock(mutex_);
        Connection& c = get();
        const Framing framing =
            multipart ? (*multipart ? Framing::kMultipart : Framing::kSingleBuffer) : c.options().framing;
        if (c.try_send(sent, framing) != Connection::Sent::kWouldBlock) return true;
        // A PUB awaiting a subscriber waits for one; then (and for PUSH at
        // once) for room to send.
        if (wait_for_subscriber(c, kSlice)) (void)wait_writable(c, kSlice);
        return false;
      });
      if (done) return;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }

  // Send and receive throw TransportError once the connection is closed.
  [[nodiscard]] Connection& get() { return connection_; }

  // For the GPU feeder's thread (gpu.cc): the same receive as recv(), under
  // the same lock, without touching Python.
  std::optional<TensorList> receive(Milliseconds wait) override {
    std::lock_guard lock(mutex_);
    std::optional<TensorList> batch = connection_.recv(wait);
    if (metrics_server_) metrics_.update(connection_);
    return batch;
  }
  [[nodiscard]] std::optional<Milliseconds> timeout() const override { return connection_.options().timeout; }
  [[nodiscard]] TimeoutError silence_error() const override { return connection_.silence_error(); }

  // Serves the receiving side's metrics on address until the connection is
  // destroyed; returns the URL to scrape.
  std::string serve_metrics(const std::string& address) {
    std::lock_guard lock(mutex_);
    if (metrics_server_) throw ArgumentError("this connection already serves metrics at " + metrics_server_->url());
    metrics_.update(connection_);
    metrics_server_ =
        std::make_unique<metrics::MetricsServer>(address, [this](metrics::MetricsText& out) { metrics_.write(out); });
    return metrics_server_->url();
  }

 private:
  std::mutex mutex_;
  Connection connection_;
  metrics::ReceiverMetrics metrics_;                        // updated after each recv once serving
  std::unique_ptr<metrics::MetricsServer> metrics_server_;  // declared last: stops before what it reads goes
};

py::tuple batch_tuple(const TensorList& batch) { return py::make_tuple(to_arrays(batch), infos_of(batch)); }

std::unique_ptr<PyConnection> make_connection(
    const std::vector<std::string>& urls, bool multipart, std::optional<double> timeout, std::uint64_t epoch,
    std::int64_t total, std::optional<std::string> topic, int send_hwm, int recv_hwm, std::int64_t queue_bytes,
    double heartbeat, double heartbeat_timeout, double reconnect, double reconnect_max, double linger,
    std::int64_t max_message_size, std::size_t stats_horizon, bool expand_braces,
    std::optional<std::string> curve_secret, std::optional<std::string> curve_server,
    std::optional<std::string> curve_allow, bool refuse_duplicate_streams, int decompress_threads) {
  if (urls.empty()) throw UrlError("a connection needs at least one URL");
  ConnectionOptions options;
  options.framing = multipart ? Framing::kMultipart : Framing::kSingleBuffer;
  options.timeout = to_timeout(timeout);
  options.epoch = epoch;
  options.total = total;
  options.topic = std::move(topic);
  options.send_high_water_mark = send_hwm;
  options.receive_high_water_mark = recv_hwm;
  options.queue_bytes = queue_bytes;
  options.heartbeat = to_milliseconds(heartbeat, "heartbeat");
  options.heartbeat_timeout = to_milliseconds(heartbeat_timeout, "heartbeat_timeout");
  options.reconnect = to_milliseconds(reconnect, "reconnect");
  options.reconnect_max = to_milliseconds(reconnect_max, "reconnect_max");
  options.linger = to_milliseconds(linger, "linger");
  options.max_message_size = max_message_size;
  options.stats_horizon = stats_horizon;
  options.expand_braces = expand_braces;
  options.refuse_duplicate_streams = refuse_duplicate_streams;
  if (decompress_threads < 0) throw ArgumentError("decompress_threads must not be negative");
  options.decompress_threads = decompress_threads;
  options.curve = read_curve_security({curve_secret.value_or(""), curve_server.value_or(""), curve_allow.value_or("")});
  return std::make_unique<PyConnection>(urls, std::move(options));
}

// A steady-clock time as time.time() reads it, as the reference's times are.
double wall_seconds(Statistics::Clock::time_point t) {
  const auto age = Statistics::Clock::now() - t;
  const auto wall =
      std::chrono::system_clock::now() - std::chrono::duration_cast<std::chrono::system_clock::duration>(age);
  return std::chrono::duration<double>(wall.time_since_epoch()).count();
}

// The reference's add(x) takes a count of bytes; a float is taken if whole.
std::uint64_t byte_count(py::handle x) {
  if (PyFloat_Check(x.ptr())) {
    const double value = PyFloat_AS_DOUBLE(x.ptr());
    if (!(value >= 0 && value <= 9.0e18 && std::floor(value) == value)) {
      throw ArgumentError("Statistics.add takes a whole number of bytes >= 0, not " + std::string(py::repr(x)));
    }
    return static_cast<std::uint64_t>(value);
  }
  PyObject* index = PyNumber_Index(x.ptr());
  if (index == nullptr) throw py::error_already_set();
  const auto value = py::reinterpret_steal<py::int_>(index);
  if (PyObject_RichCompareBool(value.ptr(), py::int_(0).ptr(), Py_LT) == 1) {
    throw ArgumentError("Statistics.add takes bytes >= 0, not " + std::string(py::repr(x)));
  }
  return value.cast<std::uint64_t>();
}

// count over the seconds from the start to the last batch; 0 before one.
double per_second_since_start(const Statistics& s, std::uint64_t count) {
  const double span = std::chrono::duration<double>(s.last() - s.started()).count();
  return s.batches() == 0 || span <= 0 ? 0.0 : static_cast<double>(count) / span;
}

// The reference's rates: over the time since the start (construction or
// reset), 0 before the first batch; the recent ones count n-1 intervals
// between n batches (the reference divides n by them).
void bind_reference_statistics(py::class_<Statistics>& c) {
  c.def_property_readonly("horizon", &Statistics::horizon)
      .def_property_readonly("count", &Statistics::batches, "batches (the reference: values added)")
      .def_property_readonly("total", &Statistics::bytes, "bytes (the reference: sum of the values added)")
      .def_property_readonly(
          "start", [](const Statistics& s) { return wall_seconds(s.started()); },
          "time.time() at construction or reset")
      .def_property_readonly(
          "last", [](const Statistics& s) { return wall_seconds(s.last()); },
          "time.time() of the last batch (the start before any)")
      .def_property_readonly(
          "recent",
          [](const Statistics& s) {
            py::list out;
            for (const Statistics::Entry& e : s.recent()) {
              out.append(py::make_tuple(wall_seconds(e.time), e.bytes));
            }
            return out;
          },
          "[(time, bytes), ...] of the recent horizon, oldest first")
      .def(
          "add", [](Statistics& s, py::handle x, std::uint64_t samples) { s.add(samples, byte_count(x)); },
          py::arg("x"), py::arg("samples") = 0, "records one batch of x bytes (and samples samples), now")
      .def(
          "reset", [](Statistics& s) { s.reset(); }, "forgets everything; the start becomes now")
      .def(
          "rate", [](const Statistics& s) { return per_second_since_start(s, s.batches()); },
          "batches per second since the start")
      .def(
          "throughput", [](const Statistics& s) { return per_second_since_start(s, s.bytes()); },
          "bytes per second since the start")
      .def("recent_rate", &Statistics::recent_batches_per_second, "batches per second over the recent horizon")
      .def("recent_throughput", &Statistics::recent_bytes_per_second, "bytes per second over the recent horizon");
}

void bind_statistics(py::module_& m) {
  py::class_<Statistics> c(m, "Statistics",
                           "Running statistics of a connection's batches (the reference's Statistics(horizon=1000)).");
  c.def(py::init([](std::size_t horizon) { return Statistics(horizon); }), py::arg("horizon") = 1000)
      .def_property_readonly("batches", &Statistics::batches)
      .def_property_readonly("samples", &Statistics::samples)
      .def_property_readonly("bytes", &Statistics::bytes)
      .def_property_readonly("seconds", &Statistics::seconds, "from the first batch to the last")
      .def_property_readonly("blocked_seconds", &Statistics::blocked_seconds,
                             "time recv() spent waiting for batches since the start")
      .def_property_readonly("recent_batches_per_second", &Statistics::recent_batches_per_second)
      .def_property_readonly("recent_samples_per_second", &Statistics::recent_samples_per_second)
      .def_property_readonly("recent_bytes_per_second", &Statistics::recent_bytes_per_second)
      .def("summary", &Statistics::summary, "the reference's 'rate ... msg/s throughput ... bytes/s' line")
      .def("__repr__", [](const Statistics& s) { return "<tensorcom.Statistics " + s.summary() + ">"; });
  bind_reference_statistics(c);
}

py::list endpoint_kinds(const std::vector<std::string>& urls, bool expand_braces) {
  py::list out;
  for (const Endpoint& e : parse_urls(urls, expand_braces)) {
    out.append(py::make_tuple(std::string(socket_kind_name(e.kind)), e.bind, e.url));
  }
  return out;
}

}  // namespace

SharedConnection& shared_connection(py::handle connection) { return connection.cast<PyConnection&>(); }

// ConnectionOptions' defaults, in the units tensorcom.Connection takes
// (seconds): its signature's defaults come from here, not from a copy.
py::dict connection_defaults() {
  const ConnectionOptions o;
  auto seconds = [](Milliseconds ms) { return static_cast<double>(ms.count()) / 1000.0; };
  py::dict d;
  d["multipart"] = o.framing == Framing::kMultipart;
  d["timeout"] = o.timeout ? py::cast(seconds(*o.timeout)) : py::none();
  d["epoch"] = o.epoch;
  d["total"] = o.total;
  d["send_hwm"] = o.send_high_water_mark;
  d["recv_hwm"] = o.receive_high_water_mark;
  d["queue_bytes"] = o.queue_bytes;
  d["heartbeat"] = seconds(o.heartbeat);
  d["heartbeat_timeout"] = seconds(o.heartbeat_timeout);
  d["reconnect"] = seconds(o.reconnect);
  d["reconnect_max"] = seconds(o.reconnect_max);
  d["linger"] = seconds(o.linger);
  d["max_message_size"] = o.max_message_size;
  d["stats_horizon"] = o.stats_horizon;
  d["expand_braces"] = o.expand_braces;
  d["refuse_duplicate_streams"] = o.refuse_duplicate_streams;
  d["decompress_threads"] = o.decompress_threads;
  return d;
}

void bind_connection(py::module_& m) {
  bind_statistics(m);
  m.def("connection_defaults", &connection_defaults, "ConnectionOptions' defaults, durations in seconds");
  m.def("endpoint_kinds", &endpoint_kinds, py::arg("urls"), py::arg("expand_braces") = true,
        "[(\"PUSH\"|\"PULL\"|\"PUB\"|\"SUB\", binds, url), ...] of URLs as a Connection parses them");
  py::class_<PyConnection>(m, "_Connection", "The C++ Connection; tensorcom.Connection wraps it.")
      // Every argument given: tensorcom.Connection fills them from connection_defaults().
      .def(py::init(&make_connection), py::arg("urls"), py::kw_only(), py::arg("multipart"), py::arg("timeout"),
           py::arg("epoch"), py::arg("total"), py::arg("topic"), py::arg("send_hwm"), py::arg("recv_hwm"),
           py::arg("queue_bytes"), py::arg("heartbeat"), py::arg("heartbeat_timeout"), py::arg("reconnect"),
           py::arg("reconnect_max"), py::arg("linger"), py::arg("max_message_size"), py::arg("stats_horizon"),
           py::arg("expand_braces"), py::arg("curve_secret"), py::arg("curve_server"), py::arg("curve_allow"),
           py::arg("refuse_duplicate_streams"), py::arg("decompress_threads"))
      .def(
          "recv",
          [](PyConnection& self, std::optional<double> timeout) -> py::object {
            std::optional<TensorList> batch = self.recv(to_timeout(timeout));
            if (!batch) return py::none();
            return batch_tuple(*batch);
          },
          py::arg("timeout") = py::none(), "(arrays, infos), or None if nothing came within timeout seconds")
      .def(
          "next", [](PyConnection& self) { return batch_tuple(self.next()); },
          "(arrays, infos) of the next batch; TimeoutError after the connection's timeout")
      .def(
          "send",
          [](PyConnection& self, py::handle arrays, py::handle infos, std::optional<bool> multipart, bool copy) {
            self.send(to_tensors(arrays, infos), multipart, copy);
          },
          py::arg("arrays"), py::arg("infos") = py::none(), py::arg("multipart") = py::none(), py::arg("copy") = true,
          "sends a list of arrays (multipart: None keeps the connection's framing); copy=False hands ZeroMQ the "
          "arrays themselves, which must not change until sent")
      .def(
          "set_timeout",
          [](PyConnection& self, std::optional<double> seconds) { self.get().set_timeout(to_timeout(seconds)); },
          py::arg("seconds"))
      .def(
          "set_linger",
          [](PyConnection& self, double seconds) { self.get().set_linger(to_milliseconds(seconds, "linger")); },
          py::arg("seconds"))
      .def(
          "set_high_water_marks",
          [](PyConnection& self, int send, int receive) { self.get().set_high_water_marks(send, receive); },
          py::arg("send"), py::arg("receive"))
      .def(
          "fileno", [](PyConnection& self) { return poll_descriptor(self.get()); },
          "a descriptor for select/poll: readable when a batch may be received (see Connection::poll_descriptor)")
      .def(
          "message_waiting", [](PyConnection& self) { return message_waiting(self.get()); },
          "whether a message can be received without waiting")
      .def("connect", &PyConnection::connect, py::arg("urls"), "binds or connects more URLs on the same socket")
      .def("serve_metrics", &PyConnection::serve_metrics, py::arg("address"),
           "serves Prometheus metrics of what is received on HOST:PORT; returns the URL")
      .def("close", &PyConnection::close)
      .def_property_readonly("closed", &PyConnection::closed)
      .def_property_readonly("urls",
                             [](PyConnection& self) {
                               std::vector<std::string> urls;
                               for (const Endpoint& endpoint : self.get().endpoints()) urls.push_back(endpoint.url);
                               return urls;
                             })
      .def_property_readonly("bound_addresses", [](PyConnection& self) { return self.get().bound_addresses(); })
      .def("describe", [](PyConnection& self) { return self.get().describe(); })
      // The live statistics (reset() resets the connection's), kept alive
      // with the connection, and readable after close.
      .def_property_readonly(
          "stats", [](PyConnection& self) -> Statistics& { return self.get().stats(); },
          py::return_value_policy::reference_internal)
      .def_property_readonly("malformed", [](PyConnection& self) { return self.get().malformed().by_name(); })
      .def_property_readonly("refused_peers", [](PyConnection& self) { return refused_peers(self.get()); })
      .def_property_readonly("subscribers", [](PyConnection& self) { return subscribers(self.get()); })
      .def_property_readonly("dropped_without_subscriber",
                             [](PyConnection& self) { return dropped_without_subscriber(self.get()); })
      .def_property_readonly("epoch", [](PyConnection& self) { return self.get().size(); })
      .def_property_readonly("total", [](PyConnection& self) { return self.get().options().total; })
      .def_property_readonly("timeout", [](PyConnection& self) -> std::optional<double> {
        const auto& timeout = self.get().options().timeout;
        if (!timeout) return std::nullopt;
        return static_cast<double>(timeout->count()) / 1000.0;
      });
}

}  // namespace tensorcom::python
