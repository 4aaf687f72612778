"""Connection: sends and receives batches (lists of arrays) on tensorcom URLs.

As the reference's tensorcom.Connection, over the C++ Connection: URLs are
brace-expanded and share one socket, received arrays are zero-copy views of
the message, sent arrays are handed to ZeroMQ without copying (it holds them
until written). One thread at a time per Connection.
"""

from . import _tensorcom
from ._tensorcom import ArgumentError, TransportError
from .converters import device_converter, listify, make_converters, transform_with
from .tenbin import as_list

_WAIT = object()  # recv(): wait as iteration does
_64BIT = ("float64", "int64", "uint64")


def refuse_64bit(arrays):
    for i, a in enumerate(arrays):
        name = str(getattr(a, "dtype", "")).removeprefix("torch.")  # numpy or torch
        if name in _64BIT:
            raise ValueError(f"array {i} is {name}: 64-bit arrays are sent only with allow64=True "
                             "(on the Connection or the send)")


def _path_or_none(path):
    return None if path is None else str(path)


class Connection:
    """A connection on one or more tensorcom URLs (`zsub://host:port`, ...).

    epoch        what len() reports (batches per epoch), for frameworks
    total        iteration stops after this many batches (-1: never)
    multipart    send two frames a tensor (the reference's default), else one buffer
    infos        info strings sent with the tensors (one per array)
    batch_transforms, converters
                 callables (or names: "torch", "torch_cuda", "numpy") applied to
                 each received array, round-robin over the batch, in that order
    report       iteration prints "count N rate ..." every report samples (<= 0: never)
    timeout      seconds iteration waits before tensorcom.TimeoutError (None: forever)
    topic        SUB subscription (default: the URL's #fragment)
    noexpand     take each URL literally, without brace expansion
    allow64      let send() take float64, int64 and uint64 arrays (refused by
                 default, as the reference intends: trainers rarely want them)
    device       received arrays as torch tensors on this device ("cpu",
                 "cuda", "cuda:1"), a shorthand for converters="torch" or a
                 CUDA converter; None (default) leaves them NumPy arrays
    raw          the reference's flag for undecoded messages (which it never
                 honoured); only False is accepted
    send_hwm, recv_hwm, heartbeat, heartbeat_timeout, reconnect, reconnect_max,
    linger, max_message_size, stats_horizon
                 as ConnectionOptions in connection.h (durations in seconds)
    curve_secret, curve_server, curve_allow
                 CURVE security (docs/security.md): this side's secret
                 certificate (NAME_secret from `tenbin keygen NAME`); the
                 server's public certificate, which makes this side a client;
                 a CURVE server's folder of allowed clients' public certificates
    """

    def __init__(self, url=None, epoch=100000, total=-1, multipart=True, infos=None, batch_transforms=None,
                 batch_count=True, converters=None, report=-1, stats_horizon=1000, timeout=None, topic=None,
                 send_hwm=8, recv_hwm=8, heartbeat=0.0, heartbeat_timeout=0.0, reconnect=0.1, reconnect_max=2.0,
                 linger=2.0, max_message_size=2 << 30, noexpand=False, allow64=False, device=None, raw=False,
                 curve_secret=None, curve_server=None, curve_allow=None):
        if raw:
            raise ArgumentError("raw=True is not supported: batches are always decoded (zero-copy) into arrays")
        if device is not None and converters is not None:
            raise ArgumentError("give converters or device, not both")
        self.epoch = epoch
        self.total = total
        self.infos = infos
        self.allow64 = allow64
        self.device = device
        self.batch_transforms = listify(batch_transforms)
        self.converters = make_converters(converters if device is None else device_converter(device))
        self.batch_count = batch_count
        self.report = report
        self._options = dict(multipart=multipart, timeout=timeout, epoch=epoch, total=total, topic=topic,
                             send_hwm=send_hwm, recv_hwm=recv_hwm, heartbeat=heartbeat,
                             heartbeat_timeout=heartbeat_timeout, reconnect=reconnect, reconnect_max=reconnect_max,
                             linger=linger, max_message_size=max_message_size, stats_horizon=stats_horizon,
                             expand_braces=not noexpand, curve_secret=_path_or_none(curve_secret),
                             curve_server=_path_or_none(curve_server), curve_allow=_path_or_none(curve_allow))
        self._c = None
        self._closed = False
        if url is not None:
            self.connect(url)

    def connect(self, url, topic=None):
        """Binds or connects every URL (a str or a list; braces are expanded).

        All URLs of a Connection share one socket, so they are given at once.
        """
        if self._c is not None:
            raise ArgumentError(f"already connected to {self._c.describe()}; give every URL at once")
        urls = [url] if isinstance(url, str) else list(url)
        options = dict(self._options)
        if topic is not None:
            options["topic"] = topic
        self._c = _tensorcom._Connection(urls, **options)

    def _core(self):
        if self._c is None:
            if self._closed:
                raise TransportError("the connection is closed")
            raise ArgumentError("the connection has no URLs yet: call connect()")
        return self._c

    def close(self):
        """Closes the socket, waiting up to `linger` seconds for queued batches to go."""
        if self._c is not None:
            self._c.close()
            self._c = None
            self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- sending ---------------------------------------------------------------

    def send(self, data, infos=None, allow64=None):
        """Sends a list of arrays (or of anything numpy.asarray takes, CPU torch
        tensors included). C-contiguous little-endian arrays are not copied.
        64-bit arrays raise ValueError unless allow64 (default: the connection's)."""
        arrays = as_list(data)
        if not (self.allow64 if allow64 is None else allow64):
            refuse_64bit(arrays)
        self._core().send(arrays, infos if infos is not None else self.infos)

    write = send

    def serve(self, source, report=-1):
        """Sends every batch of an iterable; prints "count N rate ..." every report samples."""
        count, next_report = 0, 0
        for batch in source:
            self.send(batch)
            if report > 0 and count >= next_report:
                print("count", count, self.stats.summary())
                next_report += report
            count += self.batchsize(batch)

    # --- receiving -------------------------------------------------------------

    def recv(self, timeout=_WAIT, infos=False):
        """The next batch, transformed and converted.

        Without timeout it waits as iteration does (the connection's timeout,
        then tensorcom.TimeoutError); with timeout (seconds, None: forever) it
        returns None if nothing came in time. infos=True returns (batch, infos).
        """
        if timeout is _WAIT:
            arrays, got = self._core().next()
        else:
            received = self._core().recv(timeout)
            if received is None:
                return None
            arrays, got = received
        batch = transform_with(transform_with(arrays, self.batch_transforms), self.converters)
        return (batch, got) if infos else batch

    def batchsize(self, xs):
        return len(xs[0]) if self.batch_count and len(xs) > 0 and getattr(xs[0], "ndim", 0) > 0 else 1

    def items(self, report=None):
        """Yields batches until `total` of them (forever if total < 0)."""
        report = self.report if report is None else report
        batches, count, next_report = 0, 0, 0
        while self.total < 0 or batches < self.total:
            batch = self.recv()
            batches += 1
            if report > 0 and count >= next_report:
                print("count", count, self.stats.summary())
                next_report += report
            count += self.batchsize(batch)
            yield batch

    def __iter__(self):
        return self.items()

    def __len__(self):
        """The epoch given at construction (the reference's convention)."""
        return self.epoch

    # --- state -------------------------------------------------------------------

    @property
    def stats(self):
        """tensorcom.Statistics of the batches sent or received so far."""
        return self._core().stats

    @property
    def malformed(self):
        """{kind: count} of malformed messages received and skipped."""
        return self._core().malformed

    @property
    def urls(self):
        return self._core().urls

    @property
    def bound_addresses(self):
        """For binding URLs, the addresses bound (port 0 replaced by the real port)."""
        return self._core().bound_addresses

    def __repr__(self):
        where = self._c.describe() if self._c is not None else "not connected"
        return f"<tensorcom.Connection {where}>"
