"""Resume tokens: which batches of which server streams a trainer consumed.

Servers started with --meta say in every batch's metadata which stream made
it ("stream", stable across restarts), what decides the batches' composition
("fingerprint", "seed") and where the batch sits ("epoch", "batch", and
"batches" or "last" where the epoch's length is known). A token records, per
stream, the epochs wholly consumed and, for the others, the consumed batch
indices as ranges; a server resumed from it skips those batches. The token
is a JSON-able dict (json.dumps round-trips it exactly):

    {"format": "tensorcom-resume", "version": 1,
     "epoch": E,         # lowest epoch not complete on every stream (informational)
     "streams": {"<stream>": {"fingerprint": "<16 hex>", "seed": S,
                              "complete": C,   # every epoch < C wholly consumed
                              "epochs": {"<e>": {"consumed": [[a, b], ...],  # half-open, sorted,
                                                 "batches": N or None}}}}}   # disjoint, non-adjacent

An epoch whose consumed ranges are [[0, N]] with N known, all epochs below it
complete, is folded into "complete" (its entry dropped), so a finished
epoch costs nothing.

ConsumedBatches keeps the token; EpochTracker is a receiver's whole resume
state (a Connection's): what it handed out, and the order iter_epoch()
hands batches out in, one epoch of every stream at a time. Both take
batches' metadata as dicts, already decoded.

Tokens and metadata are treated as hostile input: every field is checked,
and a problem is one tensorcom.ArgumentError naming the field.

Pure Python: no torch, no msgpack, and the C++ extension is loaded only to
raise tensorcom.ArgumentError, so that the command (tensorcom.resume_cli),
which batch scripts run, starts quickly and runs where the extension
cannot load:

    python3 -m tensorcom.resume merge OUT IN...   the union of token files, written atomically
    python3 -m tensorcom.resume show FILE         a line per stream: what the token says was consumed
"""

from bisect import bisect_right
from collections import deque
import json
import re
import sys
from typing import Any, Callable, Deque, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from .atomic import PathLike, atomic_write

Token = Dict[str, Any]
Meta = Mapping[str, Any]

FORMAT = "tensorcom-resume"
VERSION = 1
MAX_COUNT = 10 ** 12       # epochs, batch indices and batch counts
MAX_SEED = 2 ** 64 - 1     # the servers' --seed is a uint64
MAX_RANGES = 100000        # in a whole token: a token is read into memory whole
MAX_EPOCH_ENTRIES = 100000
MAX_STREAMS = 65536
MAX_STREAM_NAME = 1024

_HEX16 = re.compile(r"[0-9a-fA-F]{16}\Z")
_DECIMAL = re.compile(r"(0|[1-9][0-9]{0,12})\Z")
_AFTER_ALL = 1 << 64       # sorts after any range end: bisect_right(ranges, [i, _AFTER_ALL])


class _Invalid(ValueError):
    """A token or batch metadata refused. Raised inside this module, which
    does not load the C++ extension for it; the public functions raise it
    as tensorcom.ArgumentError (_argument_error), the command as a line on
    stderr."""


def _argument_error(error: object) -> Exception:
    """tensorcom.ArgumentError with error's message."""
    from ._tensorcom import ArgumentError
    return ArgumentError(str(error))


def _count(value, what, low=0, high=MAX_COUNT):
    """value if it is an int (not a bool) in low..high, else ArgumentError naming `what`."""
    if type(value) is not int or not low <= value <= high:
        raise _Invalid(f"{what}: expected a whole number {low}..{high}, got {value!r:.60}")
    return value


def _fingerprint(value, what):
    if type(value) is not str or not _HEX16.match(value):
        raise _Invalid(f"{what}: expected 16 hex digits, got {value!r:.60}")
    return value


def _stream_name(value, what):
    if type(value) is not str or not 0 < len(value) <= MAX_STREAM_NAME:
        raise _Invalid(f"{what}: expected a stream name (1..{MAX_STREAM_NAME} characters), got {value!r:.60}")
    return value


def _insert(ranges, i):
    """Adds batch index i to sorted, disjoint, non-adjacent half-open ranges
    (lists [a, b], changed in place). Returns False if i was already in one."""
    if ranges:
        last = ranges[-1]
        if last[1] == i:   # the usual case: batches of a stream come in order
            last[1] = i + 1
            return True
        if last[1] < i:
            ranges.append([i, i + 1])
            return True
    k = bisect_right(ranges, [i, _AFTER_ALL])  # ranges[:k] start at or before i
    if k and ranges[k - 1][1] > i:
        return False
    joins_left = k > 0 and ranges[k - 1][1] == i
    joins_right = k < len(ranges) and ranges[k][0] == i + 1
    if joins_left and joins_right:
        ranges[k - 1][1] = ranges[k][1]
        del ranges[k]
    elif joins_left:
        ranges[k - 1][1] = i + 1
    elif joins_right:
        ranges[k][0] = i
    else:
        ranges.insert(k, [i, i + 1])
    return True


def _union(range_lists):
    """The union of several range lists, sorted, with overlapping and adjacent ranges joined."""
    merged: List[List[int]] = []
    for a, b in sorted(r for ranges in range_lists for r in ranges):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


class _Epoch:
    __slots__ = ("consumed", "batches")

    def __init__(self, consumed=None, batches=None):
        self.consumed = [] if consumed is None else consumed  # [[a, b], ...]
        self.batches = batches                                # None: not known yet

    def full(self):
        return self.batches is not None and len(self.consumed) == 1 and self.consumed[0] == [0, self.batches]


class _Stream:
    __slots__ = ("fingerprint", "seed", "complete", "epochs")

    def __init__(self, fingerprint, seed, complete=0, epochs=None):
        self.fingerprint = fingerprint
        self.seed = seed
        self.complete = complete                            # every epoch below wholly consumed
        self.epochs = {} if epochs is None else epochs      # epoch (int) -> _Epoch, each >= complete

    def compact(self):
        """Folds wholly consumed epochs that follow complete ones into `complete`."""
        epoch = self.epochs.get(self.complete)
        while epoch is not None and epoch.full():
            del self.epochs[self.complete]
            self.complete += 1
            epoch = self.epochs.get(self.complete)

    def finished(self, epoch):
        if epoch < self.complete:
            return True
        entry = self.epochs.get(epoch)
        return entry is not None and entry.full()

    def as_dict(self):
        return {"fingerprint": self.fingerprint, "seed": self.seed, "complete": self.complete,
                "epochs": {str(e): {"consumed": [list(r) for r in entry.consumed], "batches": entry.batches}
                           for e, entry in sorted(self.epochs.items())}}


def _mismatch(name, field, batch_value, token_value):
    return _Invalid(f"stream {name!r}: batches have {field} {batch_value}, the token {token_value}: the servers "
                    "were started with another seed, shard list, batch size or --epoch-batches")


def _check_batches(name, epoch, entry, batches):
    """Sets or checks the epoch's batch count."""
    if entry.batches is None:
        if entry.consumed and entry.consumed[-1][1] > batches:
            raise _Invalid(f"stream {name!r} epoch {epoch}: {batches} batches, but batch "
                           f"{entry.consumed[-1][1] - 1} was consumed")
        entry.batches = batches
    elif entry.batches != batches:
        raise _Invalid(f"stream {name!r} epoch {epoch}: batches say the epoch has {batches} batches, "
                       f"earlier ones {entry.batches}")


class ConsumedBatches:
    """Which batches of which streams were consumed (handed to the trainer).

    record() takes a batch's decoded metadata; state_dict() and
    load_state_dict() give and take the token (module docstring). Not
    thread-safe: one owner (a Connection) calls it.
    """

    def __init__(self) -> None:
        self._streams: Dict[str, _Stream] = {}

    def __bool__(self) -> bool:
        return bool(self._streams)

    def record(self, meta: Meta) -> Tuple[str, int, int]:
        """Records the batch whose metadata map is `meta` (a dict with
        "stream", "fingerprint", "seed", "epoch", "batch", and optionally
        "batches" and "last"). Returns (stream, epoch, batch).

        Raises ArgumentError for a field missing or of the wrong type, a
        fingerprint or seed other than the stream's so far (the servers'
        configuration changed), a batch count that contradicts an earlier
        one, or a batch already consumed (a server served it twice).
        """
        try:
            return self._record(meta)
        except _Invalid as e:
            raise _argument_error(e) from None

    def check(self, meta: Meta) -> Tuple[str, int, int, Optional[int]]:
        """Validates a batch's metadata against what is recorded without
        recording it (record() raises the same errors, but for a batch that
        contradicts one checked and not recorded); returns (stream, epoch,
        batch, batches or None)."""
        try:
            return self._check(meta)
        except _Invalid as e:
            raise _argument_error(e) from None

    def _record(self, meta: Meta) -> Tuple[str, int, int]:
        name, epoch, index, batches = self._check(meta)
        stream = self._streams.get(name)
        if stream is None:
            stream = self._streams[name] = _Stream(meta["fingerprint"], meta["seed"])
        entry = stream.epochs.get(epoch)
        if entry is None:
            entry = stream.epochs[epoch] = _Epoch()
        if batches is not None and entry.batches != batches:
            _check_batches(name, epoch, entry, batches)
        if entry.batches is not None and index >= entry.batches:
            raise _Invalid(f"stream {name!r} epoch {epoch}: batch {index} is beyond the epoch's "
                           f"{entry.batches} batches")
        if not _insert(entry.consumed, index):
            raise _Invalid(f"stream {name!r} epoch {epoch}: batch {index} was already consumed "
                           "(the server sent it twice)")
        if epoch == stream.complete and entry.batches is not None:
            stream.compact()
        return name, epoch, index

    def _check(self, meta: Meta) -> Tuple[str, int, int, Optional[int]]:
        get = meta.get
        # Any: each is checked below, before it is used as what it must be.
        name: Any = get("stream")
        if type(name) is not str:
            _stream_name(name, "batch metadata 'stream'")
        index: Any = get("batch")
        epoch: Any = get("epoch")
        if (type(index) is not int or type(epoch) is not int
                or not (0 <= index <= MAX_COUNT and 0 <= epoch <= MAX_COUNT)):
            _count(index, "batch metadata 'batch'")
            _count(epoch, "batch metadata 'epoch'")
        batches = get("batches")
        if batches is not None:
            _count(batches, "batch metadata 'batches'", 1)
        last = get("last", False)
        if last is True:
            if batches is not None and batches != index + 1:
                raise _Invalid(f"stream {name!r} epoch {epoch}: batch {index} says it is the last "
                               f"of {batches} batches")
            batches = index + 1
        elif last is not False:
            raise _Invalid(f"batch metadata 'last': expected true or false, got {last!r:.60}")
        stream = self._streams.get(name)
        fingerprint, seed = get("fingerprint"), get("seed")
        if stream is None:
            _stream_name(name, "batch metadata 'stream'")
            _fingerprint(fingerprint, "batch metadata 'fingerprint'")
            _count(seed, "batch metadata 'seed'", 0, MAX_SEED)
            return name, epoch, index, batches
        if fingerprint != stream.fingerprint:
            raise _mismatch(name, "fingerprint", _fingerprint(fingerprint, "batch metadata 'fingerprint'"),
                            stream.fingerprint)
        elif seed != stream.seed:
            raise _mismatch(name, "seed", _count(seed, "batch metadata 'seed'", 0, MAX_SEED), stream.seed)
        if epoch < stream.complete:
            raise _Invalid(f"stream {name!r}: batch {index} of epoch {epoch} was already consumed (epochs "
                           f"below {stream.complete} are complete; the server sent it twice)")
        entry = stream.epochs.get(epoch)
        if entry is not None:
            ranges = entry.consumed
            k = bisect_right(ranges, [index, _AFTER_ALL])
            if k and ranges[k - 1][1] > index:
                raise _Invalid(f"stream {name!r} epoch {epoch}: batch {index} was already consumed "
                               "(the server sent it twice)")
        return name, epoch, index, batches

    def forget(self, stream: str) -> None:
        """Drops what is recorded of `stream` (its server restarted from scratch)."""
        self._streams.pop(stream, None)

    def epoch_finished(self, stream: str, epoch: int) -> bool:
        """Whether every batch of `epoch` on `stream` was consumed (as far
        as this token knows: the epoch's batch count must be known)."""
        entry = self._streams.get(stream)
        return entry is not None and entry.finished(epoch)

    def streams(self) -> List[str]:
        """The names of the streams recorded or loaded."""
        return list(self._streams)

    def lowest_incomplete_epoch(self) -> int:
        """The lowest epoch some stream has not wholly consumed (0 if none recorded)."""
        return min((s.complete for s in self._streams.values()), default=0)

    def state_dict(self) -> Token:
        """The token: a new JSON-able dict (module docstring)."""
        return {"format": FORMAT, "version": VERSION, "epoch": self.lowest_incomplete_epoch(),
                "streams": {name: stream.as_dict() for name, stream in self._streams.items()}}

    def load_state_dict(self, token: Mapping[str, Any]) -> None:
        """Replaces what is recorded by a token (validated first: ArgumentError
        naming the field, and nothing changes)."""
        try:
            self._streams = _parse(token)
        except _Invalid as e:
            raise _argument_error(e) from None


class EpochTracker:
    """A receiver's resume state: which batches it handed out (the resume
    token) and, for iter_epoch(), one epoch of every stream at a time.

    Batches are described by their metadata: a dict of the fields a server
    started with --meta writes ("stream", "fingerprint", "seed", "epoch",
    "batch", "batches" or "last"; other keys are ignored), or None for a
    batch that has none. record() notes a batch handed out as it came (recv,
    iteration); iter_epoch() takes batches from a receive function and
    yields those of the current epoch, holding back those of later epochs
    for the calls that yield them. Not thread-safe: one owner (a
    Connection) calls it.

    Without a loaded token, a stream whose batch contradicts what was
    recorded of it (a batch again, another fingerprint or seed) is taken
    for a server restarted from its beginning or with another
    configuration: the stream starts anew. Once a token is loaded, that is
    an error (ArgumentError): the servers were resumed from the token, so a
    batch served twice or by another configuration is one.
    """

    # iter_epoch() holds back batches of later epochs while some stream is
    # still in the current one; past either bound it raises rather than grow.
    held_bytes_limit = 1 << 30
    held_batches_limit = 65536

    def __init__(self) -> None:
        self._consumed = ConsumedBatches()
        self._tracked = 0           # batches handed out with resume metadata,
        self._untracked = 0         # and without
        self._loaded = False        # load_state_dict() was called
        self._no_msgpack = False    # metadata came that could not be read for want of msgpack
        self._epoch: Optional[int] = None   # the epoch iter_epoch() yields next; None: not started
        self._latest: Dict[str, int] = {}   # stream -> highest epoch received from it
        # epoch -> (metadata, batch, bytes) of that epoch held back, in the order they came
        self._held: Dict[int, Deque[Tuple[Meta, Any, int]]] = {}
        self._held_count = 0
        self._held_bytes = 0

    @property
    def held_count(self) -> int:
        """Batches of later epochs held back now."""
        return self._held_count

    @property
    def held_bytes(self) -> int:
        """Their bytes, as the receive function gave them."""
        return self._held_bytes

    @property
    def epoch(self) -> Optional[int]:
        """The epoch iter_epoch() yields next (None before the first: the
        loaded token's lowest incomplete epoch, else 0)."""
        return self._epoch

    def msgpack_missing(self) -> None:
        """Notes that a batch's metadata could not be read because msgpack
        is not installed (state_dict() and iter_epoch() then say so); the
        batch itself is then given as one without metadata."""
        self._no_msgpack = True

    def record(self, meta: Optional[Meta]) -> None:
        """Records a batch handed out (class docstring); None: a batch without
        resume metadata, counted (state_dict() refuses to guess then).
        Raises ArgumentError as ConsumedBatches.record does, where a token
        is loaded."""
        if meta is None:
            self._untracked += 1
            return
        try:
            self._record(meta)
        except _Invalid as e:
            raise _argument_error(e) from None

    def _record(self, meta: Meta) -> None:
        consumed = self._consumed
        try:
            name, epoch, _ = consumed._record(meta)
        except _Invalid:
            stream = meta.get("stream")
            if self._loaded or not isinstance(stream, str):
                raise
            consumed.forget(stream)  # restarted from its beginning, or with another configuration
            self._latest.pop(stream, None)
            name, epoch, _ = consumed._record(meta)
        self._tracked += 1
        if epoch > self._latest.get(name, -1):
            self._latest[name] = epoch

    def _no_metadata(self) -> Exception:
        if self._no_msgpack:
            return _argument_error("batches carry metadata, but reading it needs msgpack: pip install msgpack")
        return _argument_error("batches carry no resume metadata: start the servers with --meta")

    def state_dict(self) -> Token:
        """The resume token of the batches handed out, plus any token
        loaded: a new JSON-able dict. Raises ArgumentError if batches came
        without resume metadata and none with it."""
        if not self._tracked and not self._loaded and (self._untracked or self._no_msgpack):
            raise self._no_metadata()
        return self._consumed.state_dict()

    def load_state_dict(self, token: Mapping[str, Any]) -> None:
        """Takes a resume token: its consumed batches count as handed out,
        and iter_epoch() starts at its lowest incomplete epoch. Raises
        ArgumentError naming the field of an invalid token; nothing changes
        then."""
        self._consumed.load_state_dict(token)
        self._loaded = True

    def iter_epoch(self, receive: Callable[[], Tuple[Optional[Meta], Any, int]],
                   servers: int = 1) -> Iterator[Any]:
        """A generator of exactly one epoch's batches of every stream; the
        next call yields the next epoch. receive() gives the next batch
        that came in as (metadata or None, batch, its bytes); the batches
        yielded are those it gave, each recorded as it is yielded.

        The first epoch is the loaded token's lowest incomplete one, else 0;
        a loop left early leaves the rest of its epoch to the next call. It
        waits for `servers` streams (ArgumentError now if not a whole number
        >= 1). A stream has finished the epoch when its batches 0 ..
        batches-1 were all consumed (its batch count known from "batches"
        or the "last" batch), or when it sent a batch of a later epoch (a
        PUSH shared by ranks: another rank got the rest). Batches of later
        epochs that come meanwhile are held back, in order, for the next
        call (at most held_bytes_limit bytes and held_batches_limit batches,
        else ArgumentError naming the streams still in the epoch). Raises
        ArgumentError for a batch without resume metadata or of an earlier
        epoch, and passes on what receive() raises.
        """
        if type(servers) is not int or servers < 1:
            raise _argument_error(f"iter_epoch(): servers must be a whole number >= 1, not {servers!r}")
        return self._epoch_batches(receive, servers)

    def _epoch_batches(self, receive: Callable[[], Tuple[Optional[Meta], Any, int]],
                       servers: int) -> Iterator[Any]:
        if self._epoch is None:
            self._epoch = self._consumed.lowest_incomplete_epoch()
        epoch = self._epoch
        yield from self._held_batches(epoch)
        finished = self._consumed.epoch_finished
        unfinished = {name for name, latest in self._latest.items() if latest <= epoch and not finished(name, epoch)}
        while unfinished or len(self._latest) < servers:
            meta, batch, size = receive()
            if meta is None:
                self._untracked += 1
                raise self._no_metadata()
            try:
                name, got_epoch, index, _ = self._consumed._check(meta)
                if got_epoch < epoch:
                    raise _Invalid(f"stream {name!r} sent batch {index} of epoch {got_epoch} while epoch {epoch} "
                                   "is iterated: its epoch ended before")
                if got_epoch > epoch:
                    if got_epoch > self._latest.get(name, -1):
                        self._latest[name] = got_epoch
                    unfinished.discard(name)
                    self._hold(got_epoch, meta, batch, size, epoch, unfinished, servers)
                    continue
                self._record(meta)
            except _Invalid as e:
                raise _argument_error(e) from None
            if self._latest[name] > epoch or finished(name, epoch):
                unfinished.discard(name)
            else:
                unfinished.add(name)
            yield batch
        self._epoch = epoch + 1

    def _held_batches(self, epoch: int) -> Iterator[Any]:
        """Yields the held-back batches of `epoch`, in order, each recorded
        as it goes (a loop left early leaves the rest held)."""
        queue = self._held.get(epoch)
        while queue:
            meta, batch, size = queue.popleft()
            self._held_count -= 1
            self._held_bytes -= size
            self.record(meta)
            yield batch
        self._held.pop(epoch, None)

    def _hold(self, got_epoch: int, meta: Meta, batch: Any, size: int, epoch: int, unfinished: Set[str],
              servers: int) -> None:
        if self._held_bytes + size > self.held_bytes_limit or self._held_count >= self.held_batches_limit:
            if unfinished:
                why = f"streams {', '.join(repr(n) for n in sorted(unfinished))} are still in epoch {epoch}"
            else:
                why = f"only {len(self._latest)} of servers={servers} streams were seen in epoch {epoch}"
            raise _Invalid(f"iter_epoch(): {self._held_count} batches ({self._held_bytes} bytes) of later epochs "
                           f"held back while {why}: a server is stalled or gone")
        self._held.setdefault(got_epoch, deque()).append((meta, batch, size))
        self._held_count += 1
        self._held_bytes += size


def _parse_ranges(value, where, batches):
    if not isinstance(value, (list, tuple)):
        raise _Invalid(f"{where}: expected a list of [start, end] ranges, got {type(value).__name__}")
    ranges: List[List[int]] = []
    for k, pair in enumerate(value):
        what = f"{where}[{k}]"
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise _Invalid(f"{what}: expected a [start, end] pair, got {pair!r:.60}")
        a, b = _count(pair[0], what + "[0]"), _count(pair[1], what + "[1]", 1)
        if a >= b:
            raise _Invalid(f"{what}: range [{a}, {b}) is empty (start >= end)")
        if batches is not None and b > batches:
            raise _Invalid(f"{what}: range [{a}, {b}) ends beyond the epoch's {batches} batches")
        if ranges and a < ranges[-1][1]:
            raise _Invalid(f"{what}: range [{a}, {b}) is out of order or overlaps "
                           f"[{ranges[-1][0]}, {ranges[-1][1]})")
        if ranges and a == ranges[-1][1]:
            ranges[-1][1] = b  # adjacent: joined, as record() keeps them
        else:
            ranges.append([a, b])
    return ranges


_STREAM_FIELDS = ("fingerprint", "seed", "complete", "epochs")


def _parse_stream(value, where, budget):
    if not isinstance(value, dict):
        raise _Invalid(f"{where}: expected a dict, got {type(value).__name__}")
    for field in _STREAM_FIELDS:
        if field not in value:
            raise _Invalid(f"{where}: missing {field!r}")
    stream = _Stream(_fingerprint(value["fingerprint"], where + ".fingerprint"),
                     _count(value["seed"], where + ".seed", 0, MAX_SEED),
                     _count(value["complete"], where + ".complete"))
    epochs = value["epochs"]
    if not isinstance(epochs, dict):
        raise _Invalid(f"{where}.epochs: expected a dict, got {type(epochs).__name__}")
    budget[1] -= len(epochs)
    if budget[1] < 0:
        raise _Invalid(f"resume token: more than {MAX_EPOCH_ENTRIES} epoch entries in all")
    for key, entry in epochs.items():
        what = f"{where}.epochs[{key!r:.40}]"
        if type(key) is not str or not _DECIMAL.match(key):
            raise _Invalid(f"{what}: epoch keys must be decimal numbers 0..{MAX_COUNT} without leading zeros")
        epoch = int(key)
        if epoch < stream.complete:
            raise _Invalid(f"{what}: epoch {epoch} is below complete ({stream.complete})")
        if not isinstance(entry, dict) or "consumed" not in entry or "batches" not in entry:
            raise _Invalid(f"{what}: expected a dict with 'consumed' and 'batches'")
        batches = entry["batches"]
        if batches is not None:
            _count(batches, what + ".batches", 1)
        consumed = entry["consumed"]
        if isinstance(consumed, (list, tuple)):
            budget[0] -= len(consumed)
            if budget[0] < 0:
                raise _Invalid(f"resume token: more than {MAX_RANGES} consumed ranges in all")
        stream.epochs[epoch] = _Epoch(_parse_ranges(consumed, what + ".consumed", batches), batches)
    stream.compact()
    return stream


def _parse(token):
    """The streams of a token, validated: {name: _Stream}."""
    if not isinstance(token, dict):
        raise _Invalid(f"resume token: expected a dict, got {type(token).__name__}")
    if token.get("format") != FORMAT:
        raise _Invalid(f"resume token 'format': expected {FORMAT!r}, got {token.get('format')!r:.60}")
    if token.get("version") != VERSION or type(token.get("version")) is not int:
        raise _Invalid(f"resume token 'version': expected {VERSION}, got {token.get('version')!r:.60}")
    if "epoch" in token:
        _count(token["epoch"], "resume token 'epoch'")
    streams = token.get("streams")
    if not isinstance(streams, dict):
        raise _Invalid(f"resume token 'streams': expected a dict, got {type(streams).__name__}")
    if len(streams) > MAX_STREAMS:
        raise _Invalid(f"resume token 'streams': {len(streams)} streams, more than {MAX_STREAMS}")
    budget = [MAX_RANGES, MAX_EPOCH_ENTRIES]
    parsed = {}
    for name, value in streams.items():
        _stream_name(name, "resume token 'streams' key")
        parsed[name] = _parse_stream(value, f"streams[{name!r}]", budget)
    return parsed


def merge_state_dicts(dicts: Iterable[Mapping[str, Any]]) -> Token:
    """The union of several resume tokens (e.g. every data-parallel rank's,
    gathered with torch.distributed.all_gather_object): a batch consumed in
    any of them is consumed in the result. Ranks normally read disjoint
    streams; where several consumed batches of one stream (a PUSH shared by
    ranks), their ranges are joined and the highest `complete` wins.

    Raises ArgumentError for an invalid token (naming the field), or where
    tokens disagree on a stream's fingerprint, seed or an epoch's batch count.
    """
    try:
        return _merge(dicts)
    except _Invalid as e:
        raise _argument_error(e) from None


def _merge(dicts):
    dicts = list(dicts)
    merged: Dict[str, _Stream] = {}
    for n, token in enumerate(dicts):
        try:
            streams = _parse(token)
        except _Invalid as e:
            raise _Invalid(f"token {n}: {e}") from None
        for name, stream in streams.items():
            have = merged.get(name)
            if have is None:
                merged[name] = stream
                continue
            for field in ("fingerprint", "seed"):
                if getattr(have, field) != getattr(stream, field):
                    raise _Invalid(f"stream {name!r}: token {n} has {field} {getattr(stream, field)}, "
                                   f"an earlier token {getattr(have, field)}: tokens of differently "
                                   "started servers")
            _merge_into(name, have, stream)
    result = ConsumedBatches()
    result._streams = merged
    token = result.state_dict()
    _parse(token)  # the union's size limits, as the server and load_state_dict will check them
    return token


def _merge_into(name, have, stream):
    complete = max(have.complete, stream.complete)
    epochs = {}
    for e in sorted(set(have.epochs) | set(stream.epochs)):
        if e < complete:
            continue
        entries = [x for x in (have.epochs.get(e), stream.epochs.get(e)) if x is not None]
        known = {x.batches for x in entries if x.batches is not None}
        if len(known) > 1:
            raise _Invalid(f"stream {name!r} epoch {e}: tokens say {min(known)} and {max(known)} batches")
        batches = known.pop() if known else None
        consumed = _union(x.consumed for x in entries)
        if batches is not None and consumed and consumed[-1][1] > batches:
            raise _Invalid(f"stream {name!r} epoch {e}: batch {consumed[-1][1] - 1} consumed of {batches}")
        epochs[e] = _Epoch(consumed, batches)
    have.complete, have.epochs = complete, epochs
    have.compact()


# --- files and lines, for the command (tensorcom.resume_cli) ------------------------------

def write_token(path: PathLike, token: Mapping[str, Any]) -> None:
    """Writes token as JSON to path atomically (tensorcom.atomic)."""
    atomic_write(path, json.dumps(token, separators=(",", ":")) + "\n")


def _ranges_text(ranges):
    return " ".join(f"{a}" if b == a + 1 else f"{a}-{b - 1}" for a, b in ranges)


def stream_lines(token: Mapping[str, Any]) -> List[str]:
    """A line per stream of a valid token: seed, fingerprint, the epochs
    complete and, for each other epoch, the batches consumed. Raises
    ArgumentError naming the field of an invalid token."""
    try:
        return _stream_lines(token)
    except _Invalid as e:
        raise _argument_error(e) from None


def _printable(text: str) -> str:
    """text with control characters (C0, DEL, C1) and backslashes escaped, as
    the servers' messages show names from outside: a hostile stream name
    cannot move a terminal's cursor or hide itself."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    return "".join(out)


def _stream_lines(token):
    lines = []
    for name, stream in sorted(_parse(token).items()):
        complete = f"epochs below {stream.complete} complete" if stream.complete else "no epoch complete"
        parts = [f"{_printable(name)}: seed {stream.seed}, fingerprint {stream.fingerprint}, {complete}"]
        for epoch, entry in sorted(stream.epochs.items()):
            done = sum(b - a for a, b in entry.consumed)
            of = "?" if entry.batches is None else entry.batches
            listed = f" ({_ranges_text(entry.consumed)})" if entry.consumed else ""
            parts.append(f"epoch {epoch}: {done} of {of} batches consumed{listed}")
        lines.append("; ".join(parts))
    return lines


if __name__ == "__main__":
    # `python3 -m tensorcom.resume`, as batch scripts run it. The command
    # lives in a module of its own, which imports the package's copy of
    # this module (this one runs as __main__): no import circle.
    from tensorcom.resume_cli import main
    sys.exit(main())
