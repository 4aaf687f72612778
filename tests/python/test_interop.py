"""Interoperability of the C++ binaries with an independent Python tenbin peer.

Environment:
  TENSORCOM_BUILD_DIR   the meson build dir (servers/serve-ten, tools/tenbin)
  TENSORCOM_GOLDEN_DIR  the dir with golden.json and the golden .ten files

No fixed ports: tcp binds to port 0 / a random port on 127.0.0.1, ipc sockets
live in a short private dir under /tmp. Every subprocess is killed in a
finally, every receive has a timeout.
"""

import json
import os
import re
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

import numpy as np
import pytest
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tenbin_ref as tb  # noqa: E402

GOLDEN_DIR = os.environ.get("TENSORCOM_GOLDEN_DIR", "")
BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")

if not GOLDEN_DIR or not os.path.isfile(os.path.join(GOLDEN_DIR, "golden.json")):
    pytest.skip(f"no golden files (TENSORCOM_GOLDEN_DIR={GOLDEN_DIR!r})", allow_module_level=True)

SERVE_TEN = os.path.join(BUILD_DIR, "servers", "serve-ten")
TENBIN = os.path.join(BUILD_DIR, "tools", "tenbin")

RECV_TIMEOUT_MS = 5000   # one receive
DEADLINE_S = 20          # one whole exchange
PROC_TIMEOUT_S = 30      # one subprocess run


# --- golden data ---------------------------------------------------------------

class Golden:
    def __init__(self, case):
        self.file = case["file"]
        self.path = os.path.join(GOLDEN_DIR, self.file)
        self.nbytes = case["bytes"]
        self.arrays = [tb.golden_values(t["dtype"], t["shape"]) for t in case["tensors"]]
        self.infos = [t["info"] for t in case["tensors"]]
        self.frame_sizes = case["multipart_frame_sizes"]

    def read(self):
        with open(self.path, "rb") as f:
            return f.read()

    def __repr__(self):
        return self.file


with open(os.path.join(GOLDEN_DIR, "golden.json")) as _f:
    GOLDEN = [Golden(c) for c in json.load(_f)["cases"]]
BY_FILE = {g.file: g for g in GOLDEN}

# The files serve-ten serves in test b (all of them: each file is one list).
SERVED = [BY_FILE[f] for f in ("batch_u8_i32.ten", "all_dtypes.ten", "pair_img_cls.ten",
                               "empty_0x5.ten", "rank9.ten", "float32_2x3.ten",
                               "info_8chars.ten", "odd_sizes.ten", "rank1_len1.ten")]


def need_binaries():
    for exe in (SERVE_TEN, TENBIN):
        if not os.access(exe, os.X_OK):
            pytest.fail(f"{exe} is missing: set TENSORCOM_BUILD_DIR to the meson build dir")


# --- fixtures and helpers --------------------------------------------------------

@pytest.fixture
def short_dir():
    """A private dir with a short path, for ipc sockets (sun_path < 108)."""
    d = tempfile.mkdtemp(prefix="tcpy", dir="/tmp")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def ctx():
    c = zmq.Context()
    try:
        yield c
    finally:
        c.destroy(linger=0)


@contextmanager
def spawn(args, stderr_path):
    """Popen with stdout piped, stderr to a file; always killed on exit."""
    need_binaries()
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            proc.wait(timeout=10)
        finally:
            proc.stdout.close()


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")


def first_line(proc, stderr_path, timeout=10.0):
    """The first stdout line of proc, within timeout seconds."""
    buf = b""
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no first line from {proc.args} in {timeout}s; stderr: {read_text(stderr_path)}")
            if sel.select(left):
                chunk = os.read(fd, 4096)
                if not chunk:
                    pytest.fail(f"{proc.args} exited (rc {proc.wait()}) before its first line; "
                                f"stderr: {read_text(stderr_path)}")
                buf += chunk
    return buf.split(b"\n", 1)[0].decode()


def bound_addresses(line):
    return re.findall(r"\[bound ([^\]]+)\]", line)


def run_tool(args, timeout=PROC_TIMEOUT_S):
    need_binaries()
    return subprocess.run(args, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)


def match_golden(arrays, infos):
    """The golden case this decoded list equals exactly, or None."""
    for g in GOLDEN:
        if tb.same_list(arrays, g.arrays, infos, g.infos):
            return g
    return None


def recv_message(sock):
    try:
        return sock.recv_multipart(copy=True)
    except zmq.Again:
        pytest.fail(f"no message within {RECV_TIMEOUT_MS} ms")


# --- a. the reference implementation against the golden files ---------------

@pytest.mark.parametrize("g", GOLDEN, ids=lambda g: g.file)
def test_reference_matches_golden(g):
    raw = g.read()
    assert len(raw) == g.nbytes
    arrays, infos = tb.decode_buffer(raw, with_infos=True)
    assert infos == g.infos
    assert tb.same_list(arrays, g.arrays)
    for a, ref in zip(arrays, g.arrays):
        assert a.dtype == ref.dtype and a.shape == ref.shape
        np.testing.assert_array_equal(a, ref)
    # Re-encoding is byte-identical, in both encodings.
    assert tb.encode_buffer(g.arrays, g.infos) == raw
    frames = tb.encode_frames(g.arrays, g.infos)
    assert [len(f) for f in frames] == g.frame_sizes
    assert tb.encode_chunks(frames) == raw
    assert tb.same_list(tb.decode_frames(frames), g.arrays)


def test_reference_u4_and_0d():
    arrays = [np.arange(6, dtype=np.uint32).reshape(2, 3) * 0x01010101,
              np.array(2.5, dtype=np.float64),
              np.zeros((0,), dtype=np.int64)]
    infos = ["u4", "scalar", ""]
    buf = tb.encode_buffer(arrays, infos)
    back, back_infos = tb.decode_buffer(buf, with_infos=True)
    assert back_infos == infos
    assert tb.same_list(back, arrays)
    assert back[0].dtype == np.dtype("<u4") and back[1].shape == ()
    assert tb.decode_header(tb.encode_header(arrays[1]))[1] == ()
    assert buf[16:24] == b"u4\0\0\0\0\0\0"
    # Big-endian and non-contiguous input go on the wire as C-order little-endian.
    be = np.arange(12, dtype=">i4").reshape(3, 4).T
    assert tb.encode_data(be) == np.ascontiguousarray(be, dtype="<i4").tobytes()


# --- b. serve-ten -> Python ----------------------------------------------------

def receive_and_check(sock, mode, ordered):
    """Receives until every served file was seen (and >= len(SERVED) messages)."""
    seen, count, previous = set(), 0, None
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < len(SERVED) or count < len(SERVED):
        assert time.monotonic() < deadline, f"saw only {sorted(seen)} in {count} messages"
        frames = recv_message(sock)
        count += 1
        if mode == "single":
            assert len(frames) == 1, f"single mode sent {len(frames)} frames"
            assert frames[0][:8] == tb.MAGIC
            arrays, infos = tb.decode_buffer(frames[0], with_infos=True)
        else:
            assert not tb.is_single(frames), "multipart mode sent a single buffer"
            assert len(frames) % 2 == 0
            arrays, infos = tb.decode_frames(frames, with_infos=True)
        g = match_golden(arrays, infos)
        assert g is not None, f"message {count} ({[len(f) for f in frames]} bytes) matches no golden list"
        assert g in SERVED
        if mode == "single":
            assert frames[0] == g.read(), f"{g.file}: single-buffer message differs from the file"
        else:
            assert [len(f) for f in frames] == g.frame_sizes, g.file
        if ordered and previous is not None:
            # PUSH neither drops nor reorders: the files come round in order.
            expect = SERVED[(SERVED.index(previous) + 1) % len(SERVED)]
            assert g is expect, f"got {g.file} after {previous.file}, expected {expect.file}"
        previous = g
        seen.add(g.file)
    return count


@pytest.mark.parametrize("mode", ["multipart", "single"])
@pytest.mark.parametrize("transport", ["tcp", "ipc"])
@pytest.mark.parametrize("pattern", ["push", "pub"])
def test_serve_ten_to_python(ctx, tmp_path, short_dir, pattern, transport, mode):
    args = [SERVE_TEN, "--epochs", "0"]
    for g in SERVED:
        args += ["-i", g.path]
    if mode == "single":
        args.append("--single")
    sock = ctx.socket(zmq.PULL if pattern == "push" else zmq.SUB)
    sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
    sock.setsockopt(zmq.LINGER, 0)
    if pattern == "pub":
        sock.setsockopt(zmq.SUBSCRIBE, b"")

    if pattern == "push":
        # zpush connects: Python binds.
        if transport == "tcp":
            port = sock.bind_to_random_port("tcp://127.0.0.1")
            args.append(f"zpush://127.0.0.1:{port}")
        else:
            path = os.path.join(short_dir, "s")
            sock.bind(f"ipc://{path}")
            args.append(f"zpush+ipc://{path}")
    else:
        # zpub binds: serve-ten reports the address.
        if transport == "tcp":
            args.append("zpub://127.0.0.1:0")
        else:
            args.append(f"zpub+ipc://{os.path.join(short_dir, 's')}")

    stderr_path = tmp_path / "serve-ten.err"
    with spawn(args, stderr_path) as proc:
        line = first_line(proc, stderr_path)
        assert line.startswith(f"serve-ten: {len(SERVED)} lists on "), line
        if pattern == "pub":
            bound = bound_addresses(line)
            assert len(bound) == 1, line
            expect = r"tcp://127\.0\.0\.1:\d+" if transport == "tcp" else re.escape(f"ipc://{short_dir}/s")
            assert re.fullmatch(expect, bound[0]), line
            assert not bound[0].endswith(":0")
            sock.connect(bound[0])
        count = receive_and_check(sock, mode, ordered=(pattern == "push"))
        assert proc.poll() is None, f"serve-ten exited early; stderr: {read_text(stderr_path)}"
    assert count >= len(SERVED)


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_serve_ten_on_pub_waits_for_a_subscriber_and_loses_nothing(ctx, tmp_path, short_dir):
    """With nobody subscribed, serve-ten neither spins nor reports batches
    that went nowhere; the first subscriber gets the whole epoch, in order."""
    # PUB drops what does not fit a subscriber's queue: let it hold the burst.
    args = [SERVE_TEN, "--epochs", "1", "-r", "1", "--hwm", str(2 * len(SERVED))]
    for g in SERVED:
        args += ["-i", g.path]
    args.append(f"zpub+ipc://{os.path.join(short_dir, 's')}")
    with spawn(args, tmp_path / "serve-ten.err") as proc:
        line = first_line(proc, tmp_path / "serve-ten.err")
        time.sleep(1.0)
        assert proc.poll() is None
        assert _cpu_seconds(proc.pid) < 0.5  # waiting, not publishing to nobody
        sock = ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        sock.connect(bound_addresses(line)[0])
        got = [match_golden(*tb.decode_message(recv_message(sock), with_infos=True)) for _ in SERVED]
        assert got == SERVED
        out, _ = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0
    lines = out.decode().splitlines()
    assert sum("batches" in l and "done" not in l for l in lines) == len(SERVED), lines
    assert f"done, {len(SERVED)} batches" in lines[-1], lines


def test_serve_ten_u4_0d_file(ctx, tmp_path):
    """serve-ten serves a file with u4 and 0-d tensors that tenbin_ref wrote."""
    arrays = [np.arange(6, dtype=np.uint32).reshape(2, 3) * 0x01010101 + 0x80000000,
              np.array(-3, dtype=np.int32)]
    infos = ["u4", "zero-d"]
    path = tmp_path / "extra.ten"
    path.write_bytes(tb.encode_buffer(arrays, infos))
    r = run_tool([TENBIN, "check", str(path)])
    assert r.returncode == 0, r.stderr.decode()
    r = run_tool([TENBIN, "info", str(path)])
    assert r.returncode == 0 and b"u4" in r.stdout, r.stdout + r.stderr
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    for single in (False, True):
        args = [SERVE_TEN, "-i", str(path), "--epochs", "1", f"zpush://127.0.0.1:{port}"]
        if single:
            args.append("--single")
        with spawn(args, tmp_path / "serve-ten.err"):
            frames = recv_message(sock)
        assert tb.is_single(frames) == single
        if single:
            assert frames[0] == path.read_bytes()
        else:
            assert frames == tb.encode_frames(arrays, infos)
        back, back_infos = tb.decode_message(frames, with_infos=True)
        assert back_infos == infos and tb.same_list(back, arrays)


# --- c. Python -> C++ (tenbin record) ----------------------------------------

def malformed_messages():
    """Messages that a receiver must skip."""
    pair = BY_FILE["pair_img_cls.ten"]
    good = tb.encode_frames(pair.arrays, pair.infos)
    bad_dtype = bytearray(good[0])
    bad_dtype[0:8] = b"c8".ljust(8, b"\0")
    return [
        good[:3],                                    # odd frame count
        [bytes(bad_dtype)] + good[1:],               # unknown dtype code
        [good[0], good[1][:-4]] + good[2:],          # data frame shorter than the header says
    ]


def record_from_python(ctx, tmp_path, short_dir, transport, messages):
    """Sends messages ((good?, frames) pairs) from a bound PUSH; `tenbin record`
    receives the good ones. -> (recorded bytes, record's stderr)."""
    n_good = sum(1 for good, _ in messages if good)
    out = tmp_path / "out.ten"
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.SNDTIMEO, 10000)
    sock.setsockopt(zmq.LINGER, 0)
    if transport == "tcp":
        port = sock.bind_to_random_port("tcp://127.0.0.1")
        url = f"zrpull://127.0.0.1:{port}"
    else:
        path = os.path.join(short_dir, "r")
        sock.bind(f"ipc://{path}")
        url = f"zrpull+ipc://{path}"
    stderr_path = tmp_path / "record.err"
    args = [TENBIN, "record", url, "-n", str(n_good), "-o", str(out), "-t", "15"]
    with spawn(args, stderr_path) as proc:
        for _, frames in messages:
            sock.send_multipart(frames, copy=True)
        try:
            rc = proc.wait(timeout=PROC_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"tenbin record did not finish; stderr: {read_text(stderr_path)}")
    err = read_text(stderr_path)
    assert rc == 0, err
    assert not list(tmp_path.glob("out.ten.*.partial")), "the temporary file was not renamed"
    return out.read_bytes(), err


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_python_to_record(ctx, tmp_path, short_dir, transport):
    messages, expected = [], []   # messages: (good?, frames)
    bad = malformed_messages()
    for round_ in range(2):
        for i, g in enumerate(GOLDEN):
            # Alternate the two encodings; the second round swaps them.
            if (i + round_) % 2 == 0:
                frames = tb.encode_frames(g.arrays, g.infos)
            else:
                frames = [tb.encode_buffer(g.arrays, g.infos)]
            messages.append((True, frames))
            expected.append(tb.encode_buffer(g.arrays, g.infos))
            if round_ == 0 and i < len(bad):
                messages.append((False, bad[i]))
    data, err = record_from_python(ctx, tmp_path, short_dir, transport, messages)
    assert data == b"".join(expected)
    assert re.search(rf"skipped {len(bad)} malformed", err), err
    for what in ("odd frame count", "unknown dtype code", "data payload"):
        assert what in err, err
    # The recorded stream decodes into the golden lists, one after another.
    chunks = tb.decode_chunks(data)
    pos = 0
    for want in expected:
        k = 2 * len(tb.decode_buffer(want))
        assert tb.encode_chunks(chunks[pos:pos + k]) == want
        pos += k
    assert pos == len(chunks)


def test_python_to_record_u4_0d(ctx, tmp_path, short_dir):
    lists = [
        ([np.arange(6, dtype=np.uint32).reshape(3, 2) * 0x01010101 + 0x80000000], ["u4"]),
        ([np.array(1.25, dtype=np.float32), np.array(-7, dtype=np.int64)], ["s", "t"]),
        ([np.array(42, dtype=np.uint32)], [""]),
    ]
    messages, expected = [], []
    for i, (arrays, infos) in enumerate(lists):
        messages.append((True, tb.encode_frames(arrays, infos)))
        messages.append((True, [tb.encode_buffer(arrays, infos)]))
        expected += [tb.encode_buffer(arrays, infos)] * 2
    data, err = record_from_python(ctx, tmp_path, short_dir, "tcp", messages)
    assert "malformed" not in err, err
    assert data == b"".join(expected)


# --- d. tenbin check / cat ----------------------------------------------------

def corrupt(kind):
    """A corrupted copy of float32_2x3.ten: header chunk at 0 (payload 16..56:
    dtype, info, ndim=2, 2, 3; padded to 80), data chunk at 80 (payload 96..120)."""
    b = bytearray(BY_FILE["float32_2x3.ten"].read())
    assert len(b) == 160
    if kind == "bad_magic":
        b[0:1] = b"X"
    elif kind == "length_past_end":
        b[8:16] = struct.pack("<q", 10**6)
    elif kind == "ndim":
        b[32:40] = struct.pack("<q", 10**9)
    elif kind == "overflow":
        b[40:56] = struct.pack("<qq", 2**32 + 1, 2**32 + 1)
    elif kind == "dtype":
        b[16:24] = b"c8".ljust(8, b"\0")
    elif kind == "truncated":
        b = b[:100]
    else:
        raise ValueError(kind)
    return bytes(b)


CORRUPTIONS = {
    "bad_magic": r"bad magic",
    "length_past_end": r"chunk length 1000000\b.*\b144 bytes remain",
    "ndim": r"ndim 1000000000",
    "overflow": r"overflows",
    "dtype": r"unknown dtype code 'c8",
    "truncated": r"chunk length 24\b.*\b4 bytes remain",
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_check_rejects_corruption(tmp_path, kind):
    path = tmp_path / f"{kind}.ten"
    path.write_bytes(corrupt(kind))
    r = run_tool([TENBIN, "check", str(path)])
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, (r.returncode, err)
    assert re.search(CORRUPTIONS[kind], err), err
    assert str(path) in err
    # The reference rejects these too (length/format checks of its own).
    with pytest.raises((tb.FormatError, ValueError)):
        tb.decode_buffer(corrupt(kind))


def test_check_accepts_golden():
    r = run_tool([TENBIN, "check"] + [g.path for g in GOLDEN])
    assert r.returncode == 0, r.stderr.decode()


def test_cat_recreates_golden(tmp_path):
    out = tmp_path / "cat.ten"
    r = run_tool([TENBIN, "cat"] + [g.path for g in GOLDEN] + ["-o", str(out)])
    assert r.returncode == 0, r.stderr.decode()
    want = b"".join(g.read() for g in GOLDEN)
    assert out.read_bytes() == want
    # To stdout as well.
    r = run_tool([TENBIN, "cat"] + [g.path for g in GOLDEN])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == want


# --- e. crash safety: record's temporary file, salvage ------------------------

def small_batches(count):
    """count [images, labels] batches, each distinct, and their encodings."""
    arrays = [[np.full((1, 2, 2, 3), i, np.uint8), np.array([i], np.int32)] for i in range(count)]
    return arrays, [bytes(tb.encode_buffer(a)) for a in arrays]


def wait_for_size(path_glob, size, proc, stderr_path):
    """The one file matching path_glob once it holds size bytes."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        found = list(path_glob())
        if len(found) == 1 and found[0].stat().st_size >= size:
            return found[0]
        if proc.poll() is not None:
            pytest.fail(f"tenbin record exited (rc {proc.returncode}): {read_text(stderr_path)}")
        time.sleep(0.02)
    pytest.fail(f"no file of {size} bytes: {[str(f) for f in path_glob()]}; stderr: {read_text(stderr_path)}")


@contextmanager
def recording(ctx, tmp_path, count):
    """A bound PUSH and `tenbin record -n count` receiving from it."""
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.SNDTIMEO, 10000)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    stderr_path = tmp_path / "record.err"
    args = [TENBIN, "record", f"zrpull://127.0.0.1:{port}", "-n", str(count), "-o", str(tmp_path / "out.ten"),
            "-t", "15"]
    with spawn(args, stderr_path) as proc:
        yield sock, proc, stderr_path


def test_record_killed_leaves_its_temporary_file_and_salvage_recovers_it(ctx, tmp_path):
    arrays, encoded = small_batches(8)
    with recording(ctx, tmp_path, 1000) as (sock, proc, stderr_path):
        for a in arrays:
            sock.send_multipart(tb.encode_frames(a), copy=True)
        partial = wait_for_size(lambda: tmp_path.glob("out.ten.*.partial"), sum(map(len, encoded)), proc,
                                stderr_path)
        proc.kill()
        proc.wait(timeout=10)
    assert not (tmp_path / "out.ten").exists()
    assert partial.read_bytes() == b"".join(encoded)
    # Cut the last batch short, as a crash in mid-write would.
    partial.write_bytes(b"".join(encoded)[:-100])
    r = run_tool([TENBIN, "check", "--salvage", str(partial)])
    out = r.stdout.decode()
    assert r.returncode == 1, (out, r.stderr.decode())
    assert re.search(r"damaged: 7 whole lists \(14 tensors, lists of 2\) in the first "
                     rf"{sum(map(len, encoded[:7]))} of {sum(map(len, encoded)) - 100} bytes", out), out
    assert "damaged at byte" in out, out
    recovered = tmp_path / "recovered.ten"
    r = run_tool([TENBIN, "cat", "--salvage", str(partial), "-o", str(recovered)])
    assert r.returncode == 0, r.stderr.decode()
    assert "copied 7 whole lists" in r.stderr.decode()
    assert recovered.read_bytes() == b"".join(encoded[:7])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_record_stopped_by_a_signal_keeps_what_it_received(ctx, tmp_path, sig):
    arrays, encoded = small_batches(3)
    with recording(ctx, tmp_path, 1000) as (sock, proc, stderr_path):
        for a in arrays:
            sock.send_multipart(tb.encode_frames(a), copy=True)
        wait_for_size(lambda: tmp_path.glob("out.ten.*.partial"), sum(map(len, encoded)), proc, stderr_path)
        proc.send_signal(sig)
        rc = proc.wait(timeout=PROC_TIMEOUT_S)
    err = read_text(stderr_path)
    assert rc == 130, err
    assert "3 batches" in err and "stopped by a signal" in err, err
    assert (tmp_path / "out.ten").read_bytes() == b"".join(encoded)
    assert not list(tmp_path.glob("out.ten.*.partial"))


def test_salvage_at_every_cut_of_the_last_batch(tmp_path):
    """A file cut at any byte of its last batch gives back exactly the batches
    before it (all of them once only the last padding is missing, which the
    reference reads too)."""
    _, encoded = small_batches(3)
    whole = b"".join(encoded)
    last_start = len(whole) - len(encoded[-1])
    last_payload_end = len(whole) - (64 - 4)  # the last label's padding
    cut_file, out = tmp_path / "cut.ten", tmp_path / "out.ten"
    for cut in range(last_start, len(whole)):
        cut_file.write_bytes(whole[:cut])
        want = 3 if cut >= last_payload_end else 2
        r = run_tool([TENBIN, "cat", "--salvage", str(cut_file), "-o", str(out)])
        assert r.returncode == 0, (cut, r.stderr.decode())
        assert out.read_bytes() == b"".join(encoded[:want]), cut
        r = run_tool([TENBIN, "check", "--salvage", str(cut_file)])
        line = r.stdout.decode()
        if cut == last_start or want == 3:
            assert r.returncode == 0 and f"ok, {2 * want} tensors in {want} lists" in line, (cut, line)
        else:
            assert r.returncode == 1 and f"damaged: {want} whole lists" in line, (cut, line)
            assert f"in the first {last_start} of {cut} bytes" in line, (cut, line)


def test_files_longer_than_the_per_message_limit(tmp_path):
    """65538 tensors (32769 batches of two empty tensors, 6 MB) in one file."""
    batch = bytes(tb.encode_buffer([np.zeros((0, 2), np.uint8), np.zeros((0,), np.int32)]))
    path = tmp_path / "long.ten"
    path.write_bytes(batch * 32769)
    r = run_tool([TENBIN, "check", str(path)])
    assert r.returncode == 0, r.stderr.decode()
    assert "ok, 65538 tensors in 32769 lists" in r.stdout.decode()
    r = run_tool([TENBIN, "cat", str(path), "-o", str(tmp_path / "copy.ten")])
    assert r.returncode == 0, r.stderr.decode()
    assert (tmp_path / "copy.ten").read_bytes() == path.read_bytes()


def test_salvage_needs_the_list_length_when_nothing_repeats(tmp_path):
    """Cut inside the second batch, one batch is whole, but nothing says a list
    is two tensors long: salvage keeps nothing and asks for -g."""
    _, encoded = small_batches(2)
    path = tmp_path / "cut.ten"
    path.write_bytes(encoded[0] + encoded[1][:100])
    r = run_tool([TENBIN, "check", "--salvage", str(path)])
    assert r.returncode == 1 and "damaged: 0 whole lists (0 tensors, list length unknown: give -g)" in r.stdout.decode()
    r = run_tool([TENBIN, "cat", "--salvage", "-g", "2", str(path), "-o", str(tmp_path / "out.ten")])
    assert r.returncode == 0, r.stderr.decode()
    assert (tmp_path / "out.ten").read_bytes() == encoded[0]
