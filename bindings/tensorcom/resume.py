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
epoch costs nothing. Pure Python: no torch, no msgpack.

Tokens are treated as hostile input: every field is checked, and a problem
is one tensorcom.ArgumentError naming the field.

As a command, for batch scripts (examples/slurm/):

    python3 -m tensorcom.resume merge OUT IN...   the union of token files, written atomically
    python3 -m tensorcom.resume show FILE         a line per stream: what the token says was consumed

A bad token or file is one line on stderr and exit status 2.
"""

from bisect import bisect_right
import argparse
import json
import os
import re
import sys

from ._tensorcom import ArgumentError

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


def _count(value, what, low=0, high=MAX_COUNT):
    """value if it is an int (not a bool) in low..high, else ArgumentError naming `what`."""
    if type(value) is not int or not low <= value <= high:
        raise ArgumentError(f"{what}: expected a whole number {low}..{high}, got {value!r:.60}")
    return value


def _fingerprint(value, what):
    if type(value) is not str or not _HEX16.match(value):
        raise ArgumentError(f"{what}: expected 16 hex digits, got {value!r:.60}")
    return value


def _stream_name(value, what):
    if type(value) is not str or not 0 < len(value) <= MAX_STREAM_NAME:
        raise ArgumentError(f"{what}: expected a stream name (1..{MAX_STREAM_NAME} characters), got {value!r:.60}")
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
    merged = []
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
    return ArgumentError(f"stream {name!r}: batches have {field} {batch_value}, the token {token_value}: the servers "
                         "were started with another seed, shard list, batch size or --epoch-batches")


def _check_batches(name, epoch, entry, batches):
    """Sets or checks the epoch's batch count."""
    if entry.batches is None:
        if entry.consumed and entry.consumed[-1][1] > batches:
            raise ArgumentError(f"stream {name!r} epoch {epoch}: {batches} batches, but batch "
                                f"{entry.consumed[-1][1] - 1} was consumed")
        entry.batches = batches
    elif entry.batches != batches:
        raise ArgumentError(f"stream {name!r} epoch {epoch}: batches say the epoch has {batches} batches, "
                            f"earlier ones {entry.batches}")


class ConsumedBatches:
    """Which batches of which streams were consumed (handed to the trainer).

    record() takes a batch's decoded metadata; state_dict() and
    load_state_dict() give and take the token (module docstring). Not
    thread-safe: one owner (a Connection) calls it.
    """

    def __init__(self):
        self._streams = {}  # stream name -> _Stream

    def __bool__(self):
        return bool(self._streams)

    def record(self, meta):
        """Records the batch whose metadata map is `meta` (a dict with
        "stream", "fingerprint", "seed", "epoch", "batch", and optionally
        "batches" and "last"). Returns (stream, epoch, batch).

        Raises ArgumentError for a field missing or of the wrong type, a
        fingerprint or seed other than the stream's so far (the servers'
        configuration changed), a batch count that contradicts an earlier
        one, or a batch already consumed (a server served it twice).
        """
        name, epoch, index, batches = self.check(meta)
        stream = self._streams.get(name)
        if stream is None:
            stream = self._streams[name] = _Stream(meta["fingerprint"], meta["seed"])
        entry = stream.epochs.get(epoch)
        if entry is None:
            entry = stream.epochs[epoch] = _Epoch()
        if batches is not None and entry.batches != batches:
            _check_batches(name, epoch, entry, batches)
        if entry.batches is not None and index >= entry.batches:
            raise ArgumentError(f"stream {name!r} epoch {epoch}: batch {index} is beyond the epoch's "
                                f"{entry.batches} batches")
        if not _insert(entry.consumed, index):
            raise ArgumentError(f"stream {name!r} epoch {epoch}: batch {index} was already consumed "
                                "(the server sent it twice)")
        if epoch == stream.complete and entry.batches is not None:
            stream.compact()
        return name, epoch, index

    def check(self, meta):
        """Validates a batch's metadata against what is recorded without
        recording it (record() raises the same errors, but for a batch that
        contradicts one checked and not recorded); returns (stream, epoch,
        batch, batches or None)."""
        get = meta.get
        name = get("stream")
        if type(name) is not str:
            _stream_name(name, "batch metadata 'stream'")
        index = get("batch")
        epoch = get("epoch")
        if type(index) is not int or type(epoch) is not int or not (0 <= index <= MAX_COUNT
                                                                     and 0 <= epoch <= MAX_COUNT):
            _count(index, "batch metadata 'batch'")
            _count(epoch, "batch metadata 'epoch'")
        batches = get("batches")
        if batches is not None:
            _count(batches, "batch metadata 'batches'", 1)
        last = get("last", False)
        if last is True:
            if batches is not None and batches != index + 1:
                raise ArgumentError(f"stream {name!r} epoch {epoch}: batch {index} says it is the last "
                                    f"of {batches} batches")
            batches = index + 1
        elif last is not False:
            raise ArgumentError(f"batch metadata 'last': expected true or false, got {last!r:.60}")
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
            raise ArgumentError(f"stream {name!r}: batch {index} of epoch {epoch} was already consumed (epochs "
                                f"below {stream.complete} are complete; the server sent it twice)")
        entry = stream.epochs.get(epoch)
        if entry is not None:
            ranges = entry.consumed
            k = bisect_right(ranges, [index, _AFTER_ALL])
            if k and ranges[k - 1][1] > index:
                raise ArgumentError(f"stream {name!r} epoch {epoch}: batch {index} was already consumed "
                                    "(the server sent it twice)")
        return name, epoch, index, batches

    def forget(self, stream):
        """Drops what is recorded of `stream` (its server restarted from scratch)."""
        self._streams.pop(stream, None)

    def epoch_finished(self, stream, epoch):
        """Whether every batch of `epoch` on `stream` was consumed (as far
        as this token knows: the epoch's batch count must be known)."""
        entry = self._streams.get(stream)
        return entry is not None and entry.finished(epoch)

    def streams(self):
        """The names of the streams recorded or loaded."""
        return list(self._streams)

    def lowest_incomplete_epoch(self):
        """The lowest epoch some stream has not wholly consumed (0 if none recorded)."""
        return min((s.complete for s in self._streams.values()), default=0)

    def state_dict(self):
        """The token: a new JSON-able dict (module docstring)."""
        return {"format": FORMAT, "version": VERSION, "epoch": self.lowest_incomplete_epoch(),
                "streams": {name: stream.as_dict() for name, stream in self._streams.items()}}

    def load_state_dict(self, token):
        """Replaces what is recorded by a token (validated first: ArgumentError
        naming the field, and nothing changes)."""
        self._streams = _parse(token)


def _parse_ranges(value, where, batches):
    if not isinstance(value, (list, tuple)):
        raise ArgumentError(f"{where}: expected a list of [start, end] ranges, got {type(value).__name__}")
    ranges = []
    for k, pair in enumerate(value):
        what = f"{where}[{k}]"
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ArgumentError(f"{what}: expected a [start, end] pair, got {pair!r:.60}")
        a, b = _count(pair[0], what + "[0]"), _count(pair[1], what + "[1]", 1)
        if a >= b:
            raise ArgumentError(f"{what}: range [{a}, {b}) is empty (start >= end)")
        if batches is not None and b > batches:
            raise ArgumentError(f"{what}: range [{a}, {b}) ends beyond the epoch's {batches} batches")
        if ranges and a < ranges[-1][1]:
            raise ArgumentError(f"{what}: range [{a}, {b}) is out of order or overlaps "
                                f"[{ranges[-1][0]}, {ranges[-1][1]})")
        if ranges and a == ranges[-1][1]:
            ranges[-1][1] = b  # adjacent: joined, as record() keeps them
        else:
            ranges.append([a, b])
    return ranges


_STREAM_FIELDS = ("fingerprint", "seed", "complete", "epochs")


def _parse_stream(value, where, budget):
    if not isinstance(value, dict):
        raise ArgumentError(f"{where}: expected a dict, got {type(value).__name__}")
    for field in _STREAM_FIELDS:
        if field not in value:
            raise ArgumentError(f"{where}: missing {field!r}")
    stream = _Stream(_fingerprint(value["fingerprint"], where + ".fingerprint"),
                     _count(value["seed"], where + ".seed", 0, MAX_SEED),
                     _count(value["complete"], where + ".complete"))
    epochs = value["epochs"]
    if not isinstance(epochs, dict):
        raise ArgumentError(f"{where}.epochs: expected a dict, got {type(epochs).__name__}")
    budget[1] -= len(epochs)
    if budget[1] < 0:
        raise ArgumentError(f"resume token: more than {MAX_EPOCH_ENTRIES} epoch entries in all")
    for key, entry in epochs.items():
        what = f"{where}.epochs[{key!r:.40}]"
        if type(key) is not str or not _DECIMAL.match(key):
            raise ArgumentError(f"{what}: epoch keys must be decimal numbers 0..{MAX_COUNT} without leading zeros")
        epoch = int(key)
        if epoch < stream.complete:
            raise ArgumentError(f"{what}: epoch {epoch} is below complete ({stream.complete})")
        if not isinstance(entry, dict) or "consumed" not in entry or "batches" not in entry:
            raise ArgumentError(f"{what}: expected a dict with 'consumed' and 'batches'")
        batches = entry["batches"]
        if batches is not None:
            _count(batches, what + ".batches", 1)
        consumed = entry["consumed"]
        if isinstance(consumed, (list, tuple)):
            budget[0] -= len(consumed)
            if budget[0] < 0:
                raise ArgumentError(f"resume token: more than {MAX_RANGES} consumed ranges in all")
        stream.epochs[epoch] = _Epoch(_parse_ranges(consumed, what + ".consumed", batches), batches)
    stream.compact()
    return stream


def _parse(token):
    """The streams of a token, validated: {name: _Stream}."""
    if not isinstance(token, dict):
        raise ArgumentError(f"resume token: expected a dict, got {type(token).__name__}")
    if token.get("format") != FORMAT:
        raise ArgumentError(f"resume token 'format': expected {FORMAT!r}, got {token.get('format')!r:.60}")
    if token.get("version") != VERSION or type(token.get("version")) is not int:
        raise ArgumentError(f"resume token 'version': expected {VERSION}, got {token.get('version')!r:.60}")
    if "epoch" in token:
        _count(token["epoch"], "resume token 'epoch'")
    streams = token.get("streams")
    if not isinstance(streams, dict):
        raise ArgumentError(f"resume token 'streams': expected a dict, got {type(streams).__name__}")
    if len(streams) > MAX_STREAMS:
        raise ArgumentError(f"resume token 'streams': {len(streams)} streams, more than {MAX_STREAMS}")
    budget = [MAX_RANGES, MAX_EPOCH_ENTRIES]
    parsed = {}
    for name, value in streams.items():
        _stream_name(name, "resume token 'streams' key")
        parsed[name] = _parse_stream(value, f"streams[{name!r}]", budget)
    return parsed


def merge_state_dicts(dicts):
    """The union of several resume tokens (e.g. every data-parallel rank's,
    gathered with torch.distributed.all_gather_object): a batch consumed in
    any of them is consumed in the result. Ranks normally read disjoint
    streams; where several consumed batches of one stream (a PUSH shared by
    ranks), their ranges are joined and the highest `complete` wins.

    Raises ArgumentError for an invalid token (naming the field), or where
    tokens disagree on a stream's fingerprint, seed or an epoch's batch count.
    """
    dicts = list(dicts)
    merged = {}
    for n, token in enumerate(dicts):
        try:
            streams = _parse(token)
        except ArgumentError as e:
            raise ArgumentError(f"token {n}: {e}") from None
        for name, stream in streams.items():
            have = merged.get(name)
            if have is None:
                merged[name] = stream
                continue
            for field in ("fingerprint", "seed"):
                if getattr(have, field) != getattr(stream, field):
                    raise ArgumentError(f"stream {name!r}: token {n} has {field} {getattr(stream, field)}, "
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
            raise ArgumentError(f"stream {name!r} epoch {e}: tokens say {min(known)} and {max(known)} batches")
        batches = known.pop() if known else None
        consumed = _union(x.consumed for x in entries)
        if batches is not None and consumed and consumed[-1][1] > batches:
            raise ArgumentError(f"stream {name!r} epoch {e}: batch {consumed[-1][1] - 1} consumed of {batches}")
        epochs[e] = _Epoch(consumed, batches)
    have.complete, have.epochs = complete, epochs
    have.compact()


# --- the command ------------------------------------------------------------------

_PROGRAM = "python3 -m tensorcom.resume"
MAX_FILE_BYTES = 64 << 20  # a token file is read whole


class _BadInput(Exception):
    """A token file that cannot be used; the message names it."""


def _read_token(path):
    """The validated token in the JSON file at path, or _BadInput naming it."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise _BadInput(f"{path}: cannot read: {e.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise _BadInput(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    try:
        token = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise _BadInput(f"{path}: not JSON: {e}") from None
    try:
        _parse(token)
    except ArgumentError as e:
        raise _BadInput(f"{path}: {e}") from None
    return token


def write_token(path, token):
    """Writes token as JSON to path atomically: a temporary file beside it,
    flushed to disk, renamed over path, and the rename flushed too."""
    temp = f"{path}.tmp{os.getpid()}"
    try:
        with open(temp, "x") as f:
            json.dump(token, f, separators=(",", ":"))
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _ranges_text(ranges):
    return " ".join(f"{a}" if b == a + 1 else f"{a}-{b - 1}" for a, b in ranges)


def stream_lines(token):
    """A line per stream of a valid token: seed, fingerprint, the epochs
    complete and, for each other epoch, the batches consumed."""
    lines = []
    for name, stream in sorted(_parse(token).items()):
        complete = f"epochs below {stream.complete} complete" if stream.complete else "no epoch complete"
        parts = [f"{name}: seed {stream.seed}, fingerprint {stream.fingerprint}, {complete}"]
        for epoch, entry in sorted(stream.epochs.items()):
            done = sum(b - a for a, b in entry.consumed)
            of = "?" if entry.batches is None else entry.batches
            listed = f" ({_ranges_text(entry.consumed)})" if entry.consumed else ""
            parts.append(f"epoch {epoch}: {done} of {of} batches consumed{listed}")
        lines.append("; ".join(parts))
    return lines


def _merge_command(args):
    tokens = [_read_token(path) for path in args.inputs]
    try:
        merged = merge_state_dicts(tokens)
    except ArgumentError as e:
        raise _BadInput(f"{' '.join(args.inputs)}: {e}") from None
    try:
        write_token(args.out, merged)
    except OSError as e:
        raise _BadInput(f"{args.out}: cannot write: {e.strerror}") from None
    print(f"{_PROGRAM} merge: {len(tokens)} token file{'s' if len(tokens) > 1 else ''} -> {args.out}: "
          f"{len(merged['streams'])} streams, lowest incomplete epoch {merged['epoch']}")


def _show_command(args):
    for line in stream_lines(_read_token(args.file)):
        print(line)


def main(argv=None):
    """The command (module docstring); returns the exit status."""
    p = argparse.ArgumentParser(prog=_PROGRAM, description="Resume tokens: merge several, show one.")
    sub = p.add_subparsers(dest="command", required=True)
    merge = sub.add_parser("merge", help="write the union of token files to OUT, atomically")
    merge.add_argument("out", metavar="OUT")
    merge.add_argument("inputs", metavar="IN", nargs="+")
    show = sub.add_parser("show", help="a line per stream of a token file")
    show.add_argument("file", metavar="FILE")
    args = p.parse_args(argv)
    try:
        (_merge_command if args.command == "merge" else _show_command)(args)
    except _BadInput as e:
        print(f"{_PROGRAM} {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
elif __name__ == "tensorcom.resume" and sys.argv[:1] == ["-m"]:
    # `python3 -m tensorcom.resume`: the package imports this module before
    # runpy runs it as __main__, and runpy warns about exactly that; the
    # second copy is harmless (the classes it uses are the package's).
    import warnings
    warnings.filterwarnings("ignore", category=RuntimeWarning,
                            message="'tensorcom.resume' found in sys.modules after import of package 'tensorcom'")
