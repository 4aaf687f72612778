"""Connection: sends and receives batches (lists of arrays) on tensorcom URLs.

The reference's tensorcom.Connection (zcom.Connection), over the C++
Connection: URLs are brace-expanded and share one socket, received arrays
are zero-copy views of the message, sent arrays are handed to ZeroMQ without
copying (it holds them until written). One thread at a time per Connection.
docs/python.md lists where it differs from the reference.
"""

from __future__ import annotations

import os
from time import monotonic as _monotonic
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union
from urllib.parse import ParseResult, urlparse

from . import _tensorcom
from ._tensorcom import ArgumentError, Statistics, TimeoutError, UnavailableError
from .converters import device_converter, listify, make_converters, transform_with
from .resume import EpochTracker
from .tenbin import as_list, check_acceptable_input_type, check_infos, decode_buffer, decode_list, encode_buffer, \
    encode_list

# The C++ ConnectionOptions' defaults (durations in seconds): one home for them.
_DEFAULTS = _tensorcom.connection_defaults()

_WAIT = object()  # recv(): wait as iteration does
_NOBLOCK = 1      # zmq.NOBLOCK (zmq.DONTWAIT)


def _as_str(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _path_or_none(path):
    return None if path is None else str(path)


def _first_dim(batch):
    """The batch size of a batch: the first dimension of its first array (1 for a scalar)."""
    if len(batch) == 0:
        return 0
    shape = getattr(batch[0], "shape", None)
    return int(shape[0]) if shape else 1


def _pyzmq():
    try:
        import zmq
    except ImportError:
        return None
    return zmq


def _timeout_class():
    """The error a receive that waited in vain raises: tensorcom.TimeoutError,
    and where pyzmq is installed also a zmq.Again, which pyzmq code (and the
    reference's, whose sockets had RCVTIMEO) catches."""
    global _TIMEOUT
    if _TIMEOUT is None:
        zmq = _pyzmq()
        _TIMEOUT = TimeoutError if zmq is None else type("TimeoutError", (TimeoutError, zmq.Again), {
            "__module__": "tensorcom", "__init__": lambda self, message: TimeoutError.__init__(self, message),
            "__str__": lambda self: TimeoutError.__str__(self)})
    return _TIMEOUT


_TIMEOUT: Optional[type] = None


def _would_block():
    return _timeout_class()("no message (NOBLOCK)")


# The metadata fields resume tracking reads (tensorcom.resume); the rest of
# the map (a key per sample, ...) is skipped undecoded.
_RESUME_FIELDS = frozenset(("stream", "fingerprint", "seed", "epoch", "batch", "batches", "last"))
_NO_MSGPACK = object()


def _msgpack():
    """The msgpack module, or _NO_MSGPACK where it is not installed (resume
    tracking then sees no metadata; state_dict() says why)."""
    global _MSGPACK
    if _MSGPACK is None:
        try:
            import msgpack
            _MSGPACK = msgpack
        except ImportError:
            _MSGPACK = _NO_MSGPACK
    return _MSGPACK


_MSGPACK: Any = None


def _resume_fields(arrays, infos):
    """The resume fields of a batch's metadata (the last array whose info is
    "meta", a msgpack map) as a dict, if it has "stream" and "batch"; None for
    a batch without such metadata (none, not a map, undecodable: such a batch
    is not tracked), _NO_MSGPACK where msgpack is missing."""
    if "meta" not in infos:
        return None
    i = len(infos) - 1
    while infos[i] != "meta":
        i -= 1
    if i >= len(arrays):
        return None
    data = arrays[i]
    if type(data) is _tensorcom.DeviceTensor:
        data = data.host  # the GPU feeder keeps a host copy of the metadata
    if getattr(data, "dtype", None) != "uint8" or data.ndim != 1:
        return None
    msgpack = _msgpack()
    if msgpack is _NO_MSGPACK:
        return msgpack
    # Every batch pays for this: Unpacker.skip() passes over the per-sample
    # lists without making Python objects of them, as unpackb() would.
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=max(data.nbytes, 1))
    fields = {}
    try:
        unpacker.feed(data)
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if type(key) is str and key in _RESUME_FIELDS:
                fields[key] = unpacker.unpack()
            else:
                unpacker.skip()
    except (ValueError, TypeError, msgpack.UnpackException):
        return None
    return fields if "stream" in fields and "batch" in fields else None


# pyzmq's option numbers (zmq.RCVTIMEO, ...) for the options reference code
# sets; pyzmq itself is not needed.
_SNDHWM, _RCVHWM, _LINGER, _RCVTIMEO, _SNDTIMEO, _SUBSCRIBE, _TYPE, _FD, _EVENTS = 23, 24, 17, 27, 28, 6, 16, 14, 15
_POLLIN, _POLLOUT = 1, 2

Urls = Union[str, Sequence[str]]
Path = Union[str, "os.PathLike[str]"]


class ConnectionSocket:
    """A Connection's `socket`: the message calls pyzmq code makes on the
    reference's socket (send, recv, send_multipart, recv_multipart, close),
    done by the C++ connection. Messages are tenbin batches: frames sent are
    decoded and sent as arrays; frames received are the batch re-framed
    (headers and zero-copy views of the data). setsockopt takes the options
    reference code sets (RCVTIMEO, LINGER, SNDHWM, RCVHWM, SUBSCRIBE to the
    connection's topic) and refuses others naming the Connection argument;
    fileno() makes it pollable (pyzmq's Poller, select)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._hwm = {_SNDHWM: connection._options["send_hwm"], _RCVHWM: connection._options["recv_hwm"]}
        self._fd: Optional[int] = None

    # The fast path of tensorcom.tenbin's z* functions.
    def _tensorcom_send(self, arrays, infos, multipart):
        self._connection.send(arrays, infos=infos, multipart=multipart)

    def _tensorcom_recv(self, flags=0):
        got = self._connection._receive(0 if flags & _NOBLOCK else _WAIT, host=True)
        if got is None:
            raise _would_block()
        return got

    def send_multipart(self, frames: Sequence[Any], flags: int = 0, copy: bool = True, track: bool = False,
                       **kwargs: Any) -> None:
        self._connection.send(decode_list(frames), multipart=True, allow64=True, copy=copy)

    def send(self, data: Any, flags: int = 0, copy: bool = True, track: bool = False, **kwargs: Any) -> None:
        self._connection.send(decode_buffer(data), multipart=False, allow64=True, copy=copy)

    def recv_multipart(self, flags: int = 0, copy: bool = True, track: bool = False) -> List[Any]:
        arrays, infos = self._tensorcom_recv(flags)
        return encode_list(arrays, infos)

    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> bytes:
        arrays, infos = self._tensorcom_recv(flags)
        return bytes(encode_buffer(arrays, infos))

    def close(self, linger: Optional[int] = None) -> None:
        self._connection.close()

    @property
    def closed(self) -> bool:
        return self._connection.socket is not self

    def setsockopt(self, option: int, value: Any) -> None:
        c = self._connection
        if option == _RCVTIMEO:
            c.timeout = None if value < 0 else value / 1000.0
        elif option == _LINGER:
            c._core().set_linger(max(value, 0) / 1000.0)
        elif option in (_SNDHWM, _RCVHWM):
            self._hwm[option] = value
            c._core().set_high_water_marks(self._hwm[_SNDHWM], self._hwm[_RCVHWM])
        elif option == _SUBSCRIBE and _as_str(value) in ("", c._options["topic"] or ""):
            pass  # the connection subscribes to its topic already
        else:
            raise UnavailableError(f"socket option {option} = {value!r}: give it as a Connection argument (timeout, "
                                   "linger, send_hwm, recv_hwm, topic, ...): see docs/python.md")

    def getsockopt(self, option: int) -> int:
        c = self._connection
        if option == _RCVTIMEO:
            return -1 if c.timeout is None else int(round(c.timeout * 1000))
        if option in (_SNDHWM, _RCVHWM):
            return self._hwm[option]
        if option == _FD:
            return self.fileno()
        if option == _EVENTS:
            return _POLLIN if c._core().message_waiting() else 0
        raise UnavailableError(f"socket option {option}: read it from the Connection (timeout, total, ...)")

    setsockopt_string = setsockopt

    def fileno(self) -> int:
        """A descriptor, the same for the connection's life, that polls
        readable while a batch may be received (pyzmq's Poller and select
        call this before each wait, which is what keeps it true)."""
        fd: int = self._connection._core().fileno()
        self._fd = fd
        return fd

    # pyzmq's Poller.poll reports objects polled by fileno() as that number:
    # equal to it, `socket in dict(poller.poll())` holds as for a pyzmq socket.
    def __hash__(self) -> int:
        return hash(self._fd if self._fd is not None else self.fileno())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int) and not isinstance(other, bool):
            return other == (self._fd if self._fd is not None else self.fileno())
        return self is other

    def poll(self, timeout: Optional[float] = None, flags: int = _POLLIN) -> int:
        """pyzmq's Socket.poll: POLLIN if a batch can be received within
        timeout milliseconds (None: forever), else 0."""
        import select
        core = self._connection._core()
        deadline = None if timeout is None else _monotonic() + timeout / 1000.0
        while True:
            fd = self.fileno()
            if core.message_waiting():
                return _POLLIN & flags
            left = None if deadline is None else deadline - _monotonic()
            if left is not None and left <= 0:
                return 0
            select.select([fd], [], [], left)

    set = setsockopt
    get = getsockopt


class Connection:
    """A connection on one or more tensorcom URLs (`zsub://host:port`, ...).

    The reference's arguments, in its order:
    url          a URL or a list of them (braces expanded unless noexpand);
                 None: call connect() later (as often as needed)
    epoch        what len() reports (batches per epoch), for frameworks
    total        iteration stops when count reaches it (-1: never)
    multipart    send two frames a tensor (the reference's default), else one
                 buffer; read at every send, so it may be changed
    infos        info strings sent with the tensors (one per array)
    device       received arrays as torch tensors on this device ("cpu",
                 "cuda", "cuda:1"), a shorthand for converters=totorch(device=...);
                 None (default) leaves them NumPy arrays. On a GPU (and with
                 converters="torch_cuda") batches come through the C++ GPU
                 feeder, which receives on a thread of its own a few batches
                 ahead (tensorcom.torch explains its streams; stats count
                 batches as it receives them; the socket cannot receive then;
                 iter_epoch can hold back only `prefetch` later batches, as
                 each holds a device buffer)
    allow64      let send() take float64, int64 and uint64 arrays
    raw          accepted and ignored, as by the reference (whose constructor
                 never set it); undecoded frames: socket.recv_multipart()
    batch_transforms, converters
                 callables (or names: "torch", "torch_cuda", "numpy") applied to
                 each received array, round-robin over the batch, in that order
    batch_count  batchsize() counts samples (the first dimension), else 1
    report       iteration prints "count N rate ..." every report samples (<= 0: never)
    stats_horizon batches the recent rates of stats cover
    noexpand     take each URL literally, without brace expansion
    Keyword-only, the project's own:
    timeout      seconds iteration waits before tensorcom.TimeoutError (None: forever)
    copy         send() copies the arrays into the message (default), so a
                 buffer may be refilled at once; False hands ZeroMQ the arrays
                 themselves, which must then not change until sent
    topic        SUB subscription (default: the URL's #fragment)
    send_hwm, recv_hwm, queue_bytes, heartbeat, heartbeat_timeout, reconnect,
    reconnect_max, linger, max_message_size
                 as ConnectionOptions in connection.h (durations in seconds)
    curve_secret, curve_server, curve_allow
                 CURVE security (docs/security.md)
    refuse_duplicate_streams
                 one stream (--meta) coming from two servers at once raises
                 tensorcom.TransportError, naming both, for that batch and
                 every one after, instead of a warning (docs/deploy.md)
    decompress_threads
                 batches of compressed images (servers' --wire jpeg) are
                 decoded to their images on this many threads (default 2);
                 0 hands them on compressed (docs/tenbin.md)

    Resuming: batches from servers started with --meta are
    tracked as they are handed out (recv, iteration, iter_epoch);
    state_dict() is the token of what was consumed and load_state_dict()
    takes one back (tensorcom.resume); iter_epoch() yields one epoch of
    every stream at a time.

    Attributes as the reference's: socket (None until connected and after
    close), stats, count (batches sent or received), batch_size (of the last
    batch received), multipart, raw, infos, allow64, device, epoch, total,
    batch_transforms, batch_count, converters, report, sampler and
    batch_sampler (None, for DataLoader), addr (urlparse of the last URL).
    """

    def __init__(self, url: Optional[Urls] = None, epoch: int = _DEFAULTS["epoch"], total: int = _DEFAULTS["total"],
                 multipart: bool = _DEFAULTS["multipart"], infos: Optional[Sequence[str]] = None, device: Any = None,
                 allow64: bool = False, raw: bool = False, batch_transforms: Any = None, batch_count: bool = True,
                 converters: Any = None, report: int = -1, stats_horizon: int = _DEFAULTS["stats_horizon"],
                 noexpand: bool = False, *, timeout: Optional[float] = _DEFAULTS["timeout"], copy: bool = True,
                 topic: Optional[str] = None, send_hwm: int = _DEFAULTS["send_hwm"],
                 recv_hwm: int = _DEFAULTS["recv_hwm"], queue_bytes: int = _DEFAULTS["queue_bytes"],
                 heartbeat: float = _DEFAULTS["heartbeat"], heartbeat_timeout: float = _DEFAULTS["heartbeat_timeout"],
                 reconnect: float = _DEFAULTS["reconnect"], reconnect_max: float = _DEFAULTS["reconnect_max"],
                 linger: float = _DEFAULTS["linger"], max_message_size: int = _DEFAULTS["max_message_size"],
                 curve_secret: Optional[Path] = None, curve_server: Optional[Path] = None,
                 curve_allow: Optional[Path] = None,
                 refuse_duplicate_streams: bool = _DEFAULTS["refuse_duplicate_streams"],
                 decompress_threads: int = _DEFAULTS["decompress_threads"]) -> None:
        if device is not None and converters is not None:
            raise ArgumentError("give converters or device, not both")
        self.epoch = epoch
        self.total = total
        self.multipart = multipart
        self.infos = infos
        self.device = device
        self.allow64 = allow64
        self.raw = raw
        self.copy = copy
        self.batch_transforms = listify(batch_transforms)
        self.converters = make_converters(converters if device is None else device_converter(device))
        self.batch_count = batch_count
        self.report = report
        self.count = 0
        self.batch_size = 1
        self.sampler = None  # DataLoader looks for these
        self.batch_sampler = None
        self.context = None  # the ZeroMQ context lives in C++
        self.addr: Optional[ParseResult] = None
        self._options = dict(multipart=multipart, timeout=timeout, epoch=epoch, total=total, topic=topic,
                             send_hwm=send_hwm, recv_hwm=recv_hwm, queue_bytes=queue_bytes, heartbeat=heartbeat,
                             heartbeat_timeout=heartbeat_timeout, reconnect=reconnect, reconnect_max=reconnect_max,
                             linger=linger, max_message_size=max_message_size, stats_horizon=stats_horizon,
                             expand_braces=not noexpand, curve_secret=_path_or_none(curve_secret),
                             curve_server=_path_or_none(curve_server), curve_allow=_path_or_none(curve_allow),
                             refuse_duplicate_streams=refuse_duplicate_streams,
                             decompress_threads=decompress_threads)
        self._c: Any = None  # the C++ connection (tensorcom._tensorcom._Connection)
        self._socket: Optional[ConnectionSocket] = None
        self._stats = Statistics(stats_horizon)  # until connected
        self._tracker = EpochTracker()      # what was handed out, by stream, and iter_epoch's state
        self._feeder: Any = None            # the C++ GPU feeder that receives for torch_cuda,
        self._feeding: Optional[bool] = None  # and whether it does (None: decided at the first receive)
        if url is not None:
            self.connect(url)

    def connect(self, url: Urls, topic: Optional[str] = None) -> None:
        """Binds or connects URLs (a str or a list; braces are expanded), all on
        one socket; may be called again to add more of the same kind.
        topic: the SUB subscription (default: the URL's #fragment, else all)."""
        urls = [url] if isinstance(url, str) else list(url)
        if not urls:
            raise ArgumentError("connect() needs a URL")
        if self._c is None:
            options = dict(self._options)
            if topic is not None:
                options["topic"] = topic
            self._c = _tensorcom._Connection(urls, **options)
            self._socket = ConnectionSocket(self)
        else:
            if topic is not None and topic != self._options["topic"]:
                raise ArgumentError(f"this connection subscribes to {self._options['topic']!r}; "
                                    "one topic per connection")
            self._c.connect(urls)
        self.addr = urlparse(urls[-1])

    def _core(self):
        if self._c is None:
            raise ArgumentError("the connection has no URLs yet: call connect()")
        return self._c

    @property
    def socket(self) -> Optional[ConnectionSocket]:
        """The connection's socket (ConnectionSocket), None before connect() and after close()."""
        return self._socket

    def close(self) -> None:
        """Closes the socket. Queued batches get up to `linger` seconds to go if
        a peer ever connected; otherwise, and for receivers, it closes at once."""
        if self._feeder is not None:
            self._feeder.close()  # its thread reads the connection: it stops first
            self._feeder = None   # receiving now fails as on the host path
        if self._c is not None:
            self._c.close()
        self._socket = None

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- sending ---------------------------------------------------------------

    def send(self, data: Any, infos: Optional[Sequence[str]] = None, allow64: Optional[bool] = None,
             multipart: Optional[bool] = None, copy: Optional[bool] = None) -> None:
        """Sends a list of arrays (or of anything numpy.asarray takes, CPU torch
        tensors included), copied into the message before send returns.
        copy=False (default: the connection's copy) hands C-contiguous
        little-endian arrays to ZeroMQ as they are: do not change them until
        sent. allow64 (default: the connection's) lets 64-bit arrays go;
        multipart (default: the multipart attribute) picks the framing."""
        arrays = as_list(data)
        check_acceptable_input_type(arrays, self.allow64 if allow64 is None else allow64)
        self._core().send(arrays, infos if infos is not None else self.infos,
                          self.multipart if multipart is None else multipart, self.copy if copy is None else copy)
        self.count += 1

    def write(self, data: Any) -> None:
        """Alias for send."""
        self.send(data)

    def serve(self, source: Any, report: int = -1) -> None:
        """Sends every batch of an iterable; prints "count N rate ..." every report samples."""
        count, next_report = 0, 0
        for batch in source:
            self.send(batch)
            if report > 0 and count >= next_report:
                print("count", count, self.stats.summary())
                next_report += report
            count += self.batchsize(batch)

    # --- receiving -------------------------------------------------------------

    def _receive(self, timeout=_WAIT, track=True, host=False):
        """(arrays, infos) of the next message, undecoded by transforms; None on
        timeout. The arrays are tensorcom.DeviceTensors where the GPU feeder
        receives (_gpu_feeder), unless host: numpy arrays, or ArgumentError
        if the feeder receives. track: record it as handed out (resume tracking)."""
        if host and self._feeder is not None:
            raise ArgumentError("the GPU feeder receives this connection's batches (converters=\"torch_cuda\"): "
                                "receive them with recv() or iteration")
        feeder = None if host else self._gpu_feeder()
        source = self._core() if feeder is None else feeder
        if timeout is _WAIT:
            try:
                got = source.next()
            except TimeoutError as e:
                raise _timeout_class()(str(e)) from None
        else:
            got = source.recv(timeout)
            if got is None:
                return None
        self.count += 1
        if track:
            self._tracker.record(self._metadata(got))
        return got

    def _gpu_feeder(self):
        """The C++ GPU feeder (tensorcom._GpuFeeder) that receives for a
        torch_cuda converter, started at the first receive; None where the
        converters upload themselves. Decided once, at the first receive: the
        feeder is used when the converters are one converter that offers it
        (gpu_feeder_options(), tensorcom.torch.CudaConverter) and there are no
        batch_transforms, which need the arrays on the host.

        Why the feeder reads this connection's own C++ Connection (on its
        thread, under the connection's lock) rather than a Connection of its
        own made from the URLs: binding URLs, topic, CURVE, statistics,
        metrics, timeout and close() stay this connection's, and connect()
        may add URLs later, as on the host path."""
        if self._feeding is None:
            options = self._feeder_options()
            if options is not None:
                self._feeder = _tensorcom._GpuFeeder(self._core(), **options)
            self._feeding = options is not None
        return self._feeder

    def _feeder_options(self):
        if self.batch_transforms or not self.converters or len(self.converters) != 1:
            return None
        options = getattr(self.converters[0], "gpu_feeder_options", None)
        return options() if callable(options) else None

    def _metadata(self, got):
        """The resume fields of a received (arrays, infos) (_resume_fields), or None."""
        fields = _resume_fields(got[0], got[1])
        if fields is _NO_MSGPACK:
            self._tracker.msgpack_missing()
            return None
        return fields

    def _next_for_epoch(self):
        """The next batch for iter_epoch (EpochTracker.iter_epoch's receive):
        (resume fields or None, (arrays, infos), bytes), untracked: the
        tracker records it if it is yielded."""
        got = self._receive(_WAIT, track=False)
        return self._metadata(got), got, sum(getattr(a, "nbytes", 0) for a in got[0])

    def _deliver(self, got, infos=False):
        """What recv() returns for a received (arrays, infos)."""
        arrays, got_infos = got
        if isinstance(self.infos, (list, tuple)):
            check_infos(arrays, got_infos, self.infos)  # the reference's check of what arrives
        batch = transform_with(transform_with(arrays, self.batch_transforms), self.converters)
        self.batch_size = _first_dim(batch)
        return (batch, got_infos) if infos else batch

    def recv(self, timeout: Any = _WAIT, infos: bool = False) -> Any:
        """The next batch, transformed and converted.

        Without timeout it waits as iteration does (the connection's timeout,
        then tensorcom.TimeoutError); with timeout (seconds, None: forever) it
        returns None if nothing came in time. infos=True returns (batch, infos).
        """
        got = self._receive(timeout)
        if got is None:
            return None
        return self._deliver(got, infos)

    def batchsize(self, xs: Sequence[Any]) -> int:
        """Samples in a batch (batch_count), else 1."""
        return _first_dim(xs) if self.batch_count else 1

    def items(self, report: Optional[int] = None) -> Iterator[Any]:
        """Yields batches until count reaches total (forever if total < 0)."""
        report = self.report if report is None else report
        samples, next_report = 0, 0
        while self.total < 0 or self.count < self.total:
            batch = self.recv()
            if report > 0 and samples >= next_report:
                print("count", samples, self.stats.summary())
                next_report += report
            samples += self.batchsize(batch)
            yield batch

    def __iter__(self) -> Iterator[Any]:
        return self.items()

    def __len__(self) -> int:
        """The epoch given at construction (the reference's convention)."""
        return self.epoch

    # --- resuming (tensorcom.resume) -----------------------------------------------

    # iter_epoch() holds back batches of later epochs while some stream is
    # still in the current one; past either bound it raises rather than grow.
    held_bytes_limit = EpochTracker.held_bytes_limit
    held_batches_limit = EpochTracker.held_batches_limit

    def state_dict(self) -> Dict[str, Any]:
        """The resume token (tensorcom.resume): which batches of which server
        streams this connection handed out, plus any token loaded. A new
        JSON-able dict. Gather every rank's and join them with
        tensorcom.merge_state_dicts. Raises ArgumentError if batches came
        without resume metadata and none with it."""
        return self._tracker.state_dict()

    def load_state_dict(self, token: Mapping[str, Any]) -> None:
        """Takes a resume token (state_dict(), merge_state_dicts(), JSON
        round-tripped or not): its consumed batches count as handed out, so a
        batch received again raises ArgumentError (the server served it
        twice), as does one from a stream whose fingerprint differs.
        iter_epoch() starts at the token's lowest incomplete epoch.
        Raises ArgumentError naming the field of an invalid token; nothing
        changes then."""
        self._tracker.load_state_dict(token)

    def iter_epoch(self, servers: Optional[int] = None) -> Iterator[Any]:
        """A generator of exactly one epoch's batches (what recv() returns)
        from every stream this connection reads; the next call yields the
        next epoch. The first epoch is the loaded token's lowest incomplete
        one, else 0; a loop left early leaves the rest of its epoch to the
        next call.

        servers: how many streams to wait for; default: one a URL (braces
        expanded), which needs every URL to connect (a binding URL has any
        number of peers: give servers=). A stream has finished the epoch
        when its batches 0 .. batches-1 were all consumed (its batch count
        known from "batches" or the "last" batch), or when it sent a batch of
        a later epoch (a PUSH shared by ranks: another rank got the rest).
        Batches of later epochs that come meanwhile are held back, in order,
        for the next call (at most held_bytes_limit bytes and
        held_batches_limit batches, else ArgumentError naming the streams
        still in the epoch). Raises ArgumentError for a batch without resume
        metadata or of an earlier epoch, tensorcom.TimeoutError as recv()
        does. Servers that stop after their last epoch leave a stream
        shared with other ranks unfinished: the loop then ends in a timeout.
        tensorcom.resume.EpochTracker does the bookkeeping.
        """
        if servers is None:
            kinds = _tensorcom.endpoint_kinds(self.urls, False)
            binding = [url for _, binds, url in kinds if binds]
            if binding:
                raise ArgumentError(f"iter_epoch(): {binding[0]} binds, so any number of servers may connect: "
                                    "say how many with servers=")
            servers = len(kinds)
        tracker = self._tracker
        tracker.held_bytes_limit, tracker.held_batches_limit = self.held_bytes_limit, self.held_batches_limit
        return self._delivered(tracker.iter_epoch(self._next_for_epoch, servers))

    def _delivered(self, batches):
        for got in batches:
            yield self._deliver(got)

    # --- state -------------------------------------------------------------------

    @property
    def timeout(self) -> Optional[float]:
        """Seconds recv() and iteration wait for a batch (None: forever)."""
        return self._options["timeout"]

    @timeout.setter
    def timeout(self, seconds: Optional[float]) -> None:
        if self._c is not None:
            self._c.set_timeout(seconds)
        self._options["timeout"] = seconds

    @property
    def stats(self) -> Statistics:
        """tensorcom.Statistics of the batches sent or received so far (live:
        reset() resets the connection's)."""
        return self._stats if self._c is None else self._c.stats

    def serve_metrics(self, address: str) -> str:
        """Serves Prometheus metrics of what this connection receives (batches,
        samples, bytes, malformed messages by kind, seconds blocked waiting) on
        "HOST:PORT" (port 0: any free port), on a thread of its own until the
        connection is garbage-collected; returns the URL to scrape. See
        docs/deploy.md, "Metrics"."""
        return self._core().serve_metrics(address)

    @property
    def malformed(self) -> Dict[str, int]:
        """{kind: count} of malformed messages received and skipped."""
        return self._core().malformed

    @property
    def urls(self) -> List[str]:
        return self._core().urls

    @property
    def bound_addresses(self) -> List[str]:
        """For binding URLs, the addresses bound (port 0 replaced by the real port)."""
        return self._core().bound_addresses

    def __repr__(self) -> str:
        where = self._c.describe() if self._c is not None else "not connected"
        return f"<tensorcom.Connection {where}>"
