"""tensormon, tensorshow and tensorstat against a real serve-ten.

Environment:
  TENSORCOM_BUILD_DIR   the meson build dir (tools/*, servers/serve-ten)

Run with Debian's pytest-3 (python3-numpy, python3-zmq). No fixed ports:
serve-ten binds 127.0.0.1:0 and prints the port; a "silent" URL uses a port
the system just handed out and nothing listens on. Every subprocess is killed
in a finally and every wait is bounded.
"""

import json
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib
from contextlib import contextmanager

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import tenbin_ref as tb  # noqa: E402
from processes import killing  # noqa: E402

BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
SERVE_TEN = os.path.join(BUILD_DIR, "servers", "serve-ten")
TENBIN = os.path.join(BUILD_DIR, "tools", "tenbin")
TOOLS = ["tensormon", "tensorshow", "tensorstat"]

RUN_TIMEOUT_S = 30  # one tool run
LINE_TIMEOUT_S = 10  # serve-ten's first line


def exe(name):
    path = os.path.join(BUILD_DIR, "tools", name)
    if not os.access(path, os.X_OK):
        if name == "tensorshow":
            pytest.skip("tensorshow was not built (no OpenCV)")
        pytest.fail(f"{path} is missing: set TENSORCOM_BUILD_DIR to the meson build dir")
    return path


def run_tool(name, *args, env=None, timeout=RUN_TIMEOUT_S):
    return subprocess.run([exe(name), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env)


def read_line(stream, timeout, what):
    """One line from a pipe, within timeout seconds."""
    buf = b""
    deadline = time.monotonic() + timeout
    fd = stream.fileno()
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            pytest.fail(f"no line from {what} within {timeout} s (so far {buf!r})")
        chunk = os.read(fd, 1)
        if not chunk:
            pytest.fail(f"{what} closed its output (so far {buf!r})")
        buf += chunk
    return buf.decode()


@contextmanager
def serve(path, push=False, group=0, rate=1000, extra=()):
    """serve-ten on 127.0.0.1:0; yields the URL a tool receives from.

    push=False: PUB, every list over and over (the tool sees some of them).
    push=True: PUSH, every list exactly once, in order (the tool sees all).
    """
    if not os.access(SERVE_TEN, os.X_OK):
        pytest.fail(f"{SERVE_TEN} is missing: set TENSORCOM_BUILD_DIR to the meson build dir")
    url = "zrpush://127.0.0.1:0" if push else "zpub://127.0.0.1:0"
    args = [SERVE_TEN, "-i", str(path), "-g", str(group), "--epochs", "1" if push else "0"]
    if not push:
        args += ["--rate", str(rate)]
    proc = subprocess.Popen(args + list(extra) + [url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    with killing(proc):
        line = read_line(proc.stdout, LINE_TIMEOUT_S, "serve-ten")
        m = re.search(r"\[bound tcp://127\.0\.0\.1:(\d+)\]", line)
        assert m, line
        yield f"{'zrpull' if push else 'zsub'}://127.0.0.1:{m.group(1)}"


def silent_url():
    """A zsub URL whose port the system just handed out and nobody serves."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"zsub://127.0.0.1:{s.getsockname()[1]}"


def write_ten(path, lists):
    with open(path, "wb") as f:
        for arrays in lists:
            f.write(tb.encode_buffer(arrays))
    return path


def synth(tmp_path, b, s, n):
    path = tmp_path / f"synth-{b}-{s}-{n}.ten"
    subprocess.run([TENBIN, "synth", "-b", str(b), "-s", str(s), "-n", str(n), "-o", str(path)], check=True,
                   timeout=RUN_TIMEOUT_S)
    return path


def read_png(path):
    """(height, width, 3) uint8 RGB from an 8-bit RGB PNG, as OpenCV writes it."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    width, height, depth, colour, _, _, interlace = header
    assert (depth, colour, interlace) == (8, 2, 0), header
    raw = zlib.decompress(idat)
    stride = width * 3
    out = np.zeros((height, stride), np.int32)
    prev = np.zeros(stride, np.int32)
    for y in range(height):
        row = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, cur = row[0], np.frombuffer(row[1:], np.uint8).astype(np.int32)
        line = np.zeros(stride, np.int32)
        for x in range(stride):
            a = line[x - 3] if x >= 3 else 0
            b, c = prev[x], (prev[x - 3] if x >= 3 else 0)
            if kind == 0:
                pred = 0
            elif kind == 1:
                pred = a
            elif kind == 2:
                pred = b
            elif kind == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[x] = (cur[x] + pred) & 0xFF
        out[y], prev = line, line
    return out.reshape(height, width, 3).astype(np.uint8)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])  # width, height


def make_grid(images_bhwc):
    """torchvision's make_grid(nrow=8, padding=2, pad_value=0) of (B,H,W,3) uint8."""
    b, h, w, _ = images_bhwc.shape
    cols = min(8, b)
    rows = -(-b // cols)
    grid = np.zeros((rows * (h + 2) + 2, cols * (w + 2) + 2, 3), np.uint8)
    for i in range(b):
        y, x = (i // cols) * (h + 2) + 2, (i % cols) * (w + 2) + 2
        grid[y:y + h, x:x + w] = images_bhwc[i]
    return grid


# --- every tool -------------------------------------------------------------------

@pytest.mark.parametrize("name", TOOLS)
def test_help_usage_and_bad_urls(name):
    r = run_tool(name, "--help")
    assert r.returncode == 0 and r.stdout.startswith(f"usage: {name}") and "--timeout" in r.stdout
    r = run_tool(name, "--no-such-option")
    assert r.returncode == 2 and r.stderr.startswith(f"{name}: ") and "see --help" in r.stderr
    r = run_tool(name, "--timeout", "0")
    assert r.returncode == 2 and "--timeout" in r.stderr
    r = run_tool(name, "bogus://127.0.0.1:1")
    assert r.returncode == 1 and r.stderr.startswith(f"{name}: bad URL 'bogus://127.0.0.1:1'"), r.stderr
    r = run_tool(name, "zsub://127.0.0.1:{1,2x}")  # brace-expanded, the second is bad
    assert r.returncode == 1 and f"{name}: bad URL 'zsub://127.0.0.1:2x'" in r.stderr, r.stderr


@pytest.mark.parametrize("name", TOOLS)
def test_silence_with_timeout_exit(name):
    url = silent_url()
    start = time.monotonic()
    r = run_tool(name, "--timeout", "0.3", "--timeout-exit", url)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"{name}: no batch within 0.3 s from {url} (giving up)" in r.stderr
    assert time.monotonic() - start < 5


def test_silence_keeps_waiting_until_interrupted():
    url = silent_url()
    proc = subprocess.Popen([exe("tensormon"), "-t", "0.2", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    with killing(proc):
        first = read_line(proc.stderr, 5, "tensormon")
        second = read_line(proc.stderr, 5, "tensormon")
        assert first == f"tensormon: no batch within 0.2 s from {url} (still waiting)\n"
        assert second == f"tensormon: no batch within 0.4 s from {url} (still waiting)\n"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 130
        assert out.decode().startswith("tensormon: done, 0 batches")


def signal_a_thread(pid, sig, exclude):
    """Sends sig to one thread of pid other than `exclude` whose mask lets it
    in (as the kernel may pick any such thread for a process's signal);
    returns the thread's id, or None if there is none."""
    import ctypes
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
        if tid == exclude:
            continue
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            blocked = int(re.search(r"SigBlk:\s+([0-9a-f]+)", f.read()).group(1), 16)
        if not blocked & (1 << (sig - 1)):
            libc = ctypes.CDLL(None, use_errno=True)
            assert libc.syscall(234, pid, tid, int(sig)) == 0, "tgkill failed"  # SYS_tgkill on x86-64
            return tid
    return None


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="SYS_tgkill's number is x86-64's")
def test_a_stop_signal_taken_by_another_thread_stops_the_tool_at_once():
    """The metrics endpoint's thread takes signals too: a SIGTERM it takes
    interrupts no receive of the main thread, which must still see it
    within a moment, not at its next --timeout (60 s here)."""
    name = "tensormon"
    proc = subprocess.Popen([exe(name), "-t", "60", "--metrics", "127.0.0.1:0", silent_url()],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    with killing(proc):
        assert "metrics: http://" in read_line(proc.stderr, 10, name)
        time.sleep(0.3)
        start = time.monotonic()
        assert signal_a_thread(proc.pid, signal.SIGTERM, exclude=proc.pid), "no other thread takes SIGTERM"
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("still running 10 s after the stop signal")
        assert time.monotonic() - start < 2
        assert proc.returncode == 143 or proc.returncode == 130, proc.returncode


def test_serve_ten_stops_at_once_with_a_subscriber_that_never_reads(tmp_path):
    """PUB drops for slow subscribers anyway: a stop signal must not wait
    out serve-ten's --linger (10 s) for one whose queues are full."""
    import zmq
    path = write_ten(tmp_path / "big.ten", [[np.zeros((256, 1024), dtype=np.float32)]])
    proc = subprocess.Popen([SERVE_TEN, "-i", str(path), "--epochs", "0", "zpub://127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    ctx = zmq.Context()
    socks = []
    try:
        with killing(proc):
            line = read_line(proc.stdout, LINE_TIMEOUT_S, "serve-ten")
            address = re.search(r"\[bound (tcp://127\.0\.0\.1:\d+)\]", line).group(1)
            for stuck in (False, True):
                sub = ctx.socket(zmq.SUB)
                sub.setsockopt(zmq.LINGER, 0)
                if stuck:
                    sub.setsockopt(zmq.RCVHWM, 1)
                    sub.setsockopt(zmq.RCVBUF, 64 << 10)
                sub.setsockopt(zmq.SUBSCRIBE, b"")
                sub.connect(address)
                socks.append(sub)
            healthy = socks[0]
            healthy.setsockopt(zmq.RCVTIMEO, 10000)
            for _ in range(200):  # the stuck subscriber's queues fill meanwhile
                healthy.recv_multipart()
            start = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            took = time.monotonic() - start
            assert took < 3, f"stopped after {took:.1f} s"
    finally:
        for sock in socks:
            sock.close(linger=0)
        ctx.term()


# --- tensormon ------------------------------------------------------------------

def test_tensormon_json_counts(tmp_path):
    b, s = 4, 8
    batch_bytes = b * s * s * 3 + b * 4  # uint8 images, int32 labels
    # 4 batches a second: a line every 2 batches falls due before half a
    # second has passed, and waits for the next batch that ends one.
    with serve(synth(tmp_path, b, s, 3), rate=4) as url:
        r = run_tool("tensormon", "--json", "-c", 5, "-r", 2, url)
    assert r.returncode == 0, r.stderr
    objects = [json.loads(line) for line in r.stdout.splitlines()]
    reports, summary = objects[:-1], objects[-1]
    indices = [o["index"] for o in reports]
    assert indices and indices == sorted(set(indices)) and all(2 <= i <= 5 for i in indices), indices
    for o in reports:
        assert o["batch_size"] == b and o["batches_per_s"] > 0 and o["samples_per_s"] > 0 and o["mb_per_s"] > 0
    assert summary["summary"] is True
    # Counts print as integers, rates as doubles.
    assert all(type(summary[k]) is int for k in ("batches", "samples", "bytes"))
    assert all(type(o[k]) is int for o in reports for k in ("index", "batch_size"))
    assert all(type(summary[k]) is float for k in ("seconds", "batches_per_s", "samples_per_s", "mb_per_s"))
    assert set(summary) == {"summary", "batches", "samples", "bytes", "seconds", "batches_per_s", "samples_per_s",
                            "mb_per_s", "waiting", "bottleneck"}
    for o in objects:
        assert 0 <= o["waiting"] <= 1 and o["bottleneck"] in ("producer", "consumer")
    assert (summary["batches"], summary["samples"], summary["bytes"]) == (5, 5 * b, 5 * batch_bytes)
    assert summary["seconds"] > 0
    # The clock starts at the first batch: 4 intervals, 4 batches' samples and bytes.
    assert summary["batches_per_s"] == pytest.approx(4 / summary["seconds"])
    assert summary["samples_per_s"] == pytest.approx(4 * b / summary["seconds"])
    assert summary["mb_per_s"] == pytest.approx(4 * batch_bytes / summary["seconds"] / 1e6)


def test_tensormon_text_lines(tmp_path):
    with serve(synth(tmp_path, 6, 8, 2), rate=4) as url:
        r = run_tool("tensormon", "-c", 5, "-r", 2, url)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert 2 <= len(lines) <= 3, lines
    for line in lines[:-1]:
        m = re.fullmatch(r" *(\d+) +([\d.]+) batches/s +([\d.]+) samples/s \(batchsize: (\d+)\) +([\d.]+) MB/s"
                         r"; bottleneck: (producer|consumer) \(waiting \d+%\)", line)
        assert m, line
        index = int(m.group(1))
        bps, sps, mbs = (float(m.group(i)) for i in (2, 3, 5))
        # The reference's line exactly (its own format string), MB/s after it.
        reference = "{:20d} {:8.3f} batches/s {:8.3f} samples/s (batchsize: {:d})".format(index, bps, sps, 6)
        assert line.startswith(reference + f" {mbs:8.3f} MB/s; ")
    assert re.fullmatch(r"tensormon: done, 5 batches, 30 samples, \d+ bytes in [\d.]+ s: [\d.]+ batches/s "
                        r"[\d.]+ samples/s [\d.]+ MB/s; bottleneck: (producer|consumer) \(waiting \d+%\)",
                        lines[-1]), lines[-1]


def test_tensormon_live_line_on_a_terminal(tmp_path):
    with serve(synth(tmp_path, 2, 4, 1), rate=50) as url:
        master, slave = pty.openpty()
        proc = subprocess.Popen([exe("tensormon"), "-c", "60", url], stdout=slave, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        os.close(slave)
        out = b""
        try:
            with killing(proc):
                deadline = time.monotonic() + RUN_TIMEOUT_S
                while time.monotonic() < deadline:
                    if select.select([master], [], [], 0.2)[0]:
                        try:
                            chunk = os.read(master, 4096)
                        except OSError:  # EIO: the process closed the terminal
                            break
                        if not chunk:
                            break
                        out += chunk
                    elif proc.poll() is not None:
                        break
                assert proc.wait(timeout=10) == 0
        finally:
            os.close(master)
    text = out.decode()
    assert "\r" in text and "\x1b[K" in text and "batches/s" in text, text
    assert "tensormon: done, 60 batches, 120 samples" in text.splitlines()[-1]


def report_bounds(reports):
    """Each report's rates against the most its batches could give over the
    shortest span a rate is computed over (half a second). The first window
    starts at batch 1, so it holds index - 1 batches."""
    previous = 1
    for o in reports:
        batches = o["index"] - previous
        assert batches >= 1, reports
        assert o["batches_per_s"] <= batches / 0.5 + 1e-9, (o, reports)
        assert o["samples_per_s"] <= batches * o["batch_size"] / 0.5 + 1e-9, (o, reports)
        previous = o["index"]


def test_tensormon_never_rates_a_burst(tmp_path):
    """An unpaced PUSH server: its 40 small batches arrive microseconds
    apart, as queued batches do (such a burst once read as 165,864
    batches/s). No line may claim more than its batches over half a second."""
    with serve(synth(tmp_path, 2, 4, 40), push=True) as url:
        r = run_tool("tensormon", "--json", "-c", 40, "-r", 2, url)
    assert r.returncode == 0, r.stderr
    objects = [json.loads(line) for line in r.stdout.splitlines()]
    assert objects[-1]["batches"] == 40
    report_bounds(objects[:-1])


def test_tensormon_rates_of_a_paced_server(tmp_path):
    with serve(synth(tmp_path, 2, 4, 3), rate=40) as url:
        r = run_tool("tensormon", "--json", "-c", 50, "-r", 5, url)
    assert r.returncode == 0, r.stderr
    objects = [json.loads(line) for line in r.stdout.splitlines()]
    reports = objects[:-1]
    assert reports, r.stdout  # 50 batches at 40 a second: more than half a second
    report_bounds(reports)
    assert all(o["batches_per_s"] < 80 for o in reports), reports  # twice the pace: a burst would show more


@pytest.mark.parametrize("switch", ["-R", "--raw"])
def test_tensormon_accepts_the_references_raw(tmp_path, switch):
    with serve(synth(tmp_path, 3, 4, 2)) as url:
        r = run_tool("tensormon", switch, "--json", "-c", 3, url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["samples"] == 9


# --- tensorstat -----------------------------------------------------------------

@pytest.mark.parametrize("switch", ["-r", "--raw"])
def test_tensorstat_raw_prints_the_source_line_only(tmp_path, switch):
    with serve(synth(tmp_path, 3, 4, 4), push=True) as url:
        r = run_tool("tensorstat", switch, "-c", 4, url)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0] == f"tensorstat: 4 batches from {url}", lines
    assert re.fullmatch(r"source: rate [\d.]+ msg/s throughput [\d.]+e[+-]\d+ bytes/s samples [\d.]+/s", lines[1])
    r = run_tool("tensorstat", switch, "--json", url)
    assert r.returncode == 2 and "leave out --json" in r.stderr, r.stderr


@pytest.mark.parametrize("switch", ["-b", "--unbatched"])
def test_tensorstat_accepts_unbatched_and_ignores_it(tmp_path, switch):
    path = write_ten(tmp_path / "stat.ten", stat_lists())
    outputs = []
    for args in ([], [switch]):
        with serve(path, push=True, group=3) as url:
            r = run_tool("tensorstat", "-c", 3, "--json", *args, url)
        assert r.returncode == 0, r.stderr
        outputs.append(json.loads(r.stdout))
    assert outputs[0] == outputs[1]


def stat_lists():
    """Three batches of [float32 BCHW images, int64 labels, float16 (B, 2)]; the last smaller."""
    rng = np.random.default_rng(7)
    lists = []
    for b in (4, 4, 2):
        images = (rng.normal(size=(b, 3, 5, 6)) * [[[2.0]], [[0.5]], [[1.0]]] + [[[10]], [[-3]], [[0]]])
        labels = rng.integers(0, 5, size=b).astype(np.int64)
        extra = (rng.normal(size=(b, 2)) * 4).astype(np.float16)
        lists.append([images.astype(np.float32), labels, extra])
    return lists


def g3(x):
    return f"{x:.3g}"


def test_tensorstat_matches_numpy(tmp_path):
    lists = stat_lists()
    path = write_ten(tmp_path / "stat.ten", lists)
    with serve(path, push=True, group=3) as url:
        r = run_tool("tensorstat", "--json", "-c", 3, url)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["batches"] == 3
    for i, got in enumerate(report["inputs"]):
        every = np.concatenate([batch[i].astype(np.float64).ravel() for batch in lists])
        assert (got["index"], got["count"], got["n"]) == (i, 3, every.size)
        assert got["min"] == every.min() and got["max"] == every.max()
        assert got["mean"] == pytest.approx(every.mean(), rel=1e-12, abs=1e-12)
        assert got["std"] == pytest.approx(every.std(), rel=1e-12)
        shapes = {(str(batch[i].dtype),) + batch[i].shape for batch in lists}
        assert {(s["dtype"],) + tuple(s["shape"]) for s in got["signatures"]} == shapes
    images = np.concatenate([batch[0].astype(np.float64) for batch in lists])
    channels = report["inputs"][0]["channels"]
    assert channels["layout"] == "BCHW"
    assert channels["mean"] == pytest.approx(images.mean(axis=(0, 2, 3)).tolist(), rel=1e-12)
    assert channels["std"] == pytest.approx(images.std(axis=(0, 2, 3)).tolist(), rel=1e-12)
    assert report["inputs"][1]["channels"] is None and report["inputs"][2]["channels"] is None
    labels = np.concatenate([batch[1] for batch in lists])
    values, counts = np.unique(labels, return_counts=True)
    got = report["labels"]
    assert got["input"] == 1 and got["n"] == labels.size and got["classes"] == values.size
    assert (got["min"], got["max"]) == (values.min(), values.max())
    assert (got["min_count"], got["max_count"]) == (counts.min(), counts.max())
    assert got["counts"] == {str(v): int(c) for v, c in zip(values, counts)}


def test_tensorstat_json_spells_nan_and_infinity_as_null(tmp_path):
    nan = np.array([[1, np.nan, 3]], np.float32)
    inf = np.array([[-2, 5, np.inf]], np.float32)
    path = write_ten(tmp_path / "nan.ten", [[nan, inf]])
    with serve(path, push=True, group=2) as url:
        r = run_tool("tensorstat", "--json", "-c", 1, url)
    assert r.returncode == 0, r.stderr
    assert "NaN" not in r.stdout and "Infinity" not in r.stdout, r.stdout
    with_nan, with_inf = json.loads(r.stdout)["inputs"]
    assert [with_nan[k] for k in ("min", "max", "mean", "std")] == [None] * 4  # NaN propagates, as in NumPy
    assert (with_inf["min"], with_inf["max"], with_inf["mean"]) == (-2.0, None, None)
    assert with_nan["n"] == with_inf["n"] == 3


def test_tensorstat_text_in_the_references_words(tmp_path):
    lists = stat_lists()
    path = write_ten(tmp_path / "stat.ten", lists)
    with serve(path, push=True, group=3) as url:
        r = run_tool("tensorstat", "-c", 3, url)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"tensorstat: 3 batches from {url}"
    for i in range(3):
        every = np.concatenate([batch[i].astype(np.float64).ravel() for batch in lists])
        at = lines.index(f"=== Input {i} ===")
        assert lines[at + 2] == (f"3 [{g3(every.min())} {g3(every.max())}] mean={g3(every.mean())} "
                                 f"std={g3(every.std())} n={every.size}")
        dtype = str(lists[0][i].dtype)
        rest = lists[0][i].shape[1:]
        assert lines[at + 3] == "{" + f"{(dtype, 4) + rest}, {(dtype, 2) + rest}" + "}"
    images = np.concatenate([batch[0].astype(np.float64) for batch in lists])
    means = " ".join(g3(v) for v in images.mean(axis=(0, 2, 3)))
    stds = " ".join(g3(v) for v in images.std(axis=(0, 2, 3)))
    assert f"channels BCHW: mean=[{means}] std=[{stds}]" in lines
    labels = np.concatenate([batch[1] for batch in lists])
    values, counts = np.unique(labels, return_counts=True)
    rare, common = values[counts.argmin()], values[counts.argmax()]
    assert lines[-1] == (f"{labels.size} labels, {values.size} distinct classes in [{values.min()} {values.max()}], "
                         f"per class: min {counts.min()} (class {rare}), max {counts.max()} (class {common})")


# --- tensorshow -----------------------------------------------------------------

@pytest.mark.parametrize("b,s", [(10, 16), (3, 12)])
def test_tensorshow_grid_size(tmp_path, b, s):
    out = tmp_path / "grid.png"
    with serve(synth(tmp_path, b, s, 2)) as url:
        r = run_tool("tensorshow", "-o", out, url)
    assert r.returncode == 0, r.stderr
    cols, rows = min(8, b), -(-b // min(8, b))
    size = (cols * (s + 2) + 2, rows * (s + 2) + 2)
    assert png_size(out) == size
    assert r.stdout == (f"tensorshow: batch 0: {b} images uint8 ({b}, {s}, {s}, 3) BHWC, labels int32 ({b},) "
                        f"-> {out} ({size[0]}x{size[1]})\n")


def test_tensorshow_several_batches(tmp_path):
    out = tmp_path / "many.png"
    with serve(synth(tmp_path, 5, 8, 3)) as url:
        r = run_tool("tensorshow", "-n", 2, "-o", out, url)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.glob("many*")) == ["many-000.png", "many-001.png"]
    for name in ("many-000.png", "many-001.png"):
        assert png_size(tmp_path / name) == (5 * 10 + 2, 12)


def pixel_images(b=3, h=5, w=7):
    """(B,H,W,3) uint8 with 0 and 255 present, so that min-max scaling is the identity."""
    rng = np.random.default_rng(11)
    images = rng.integers(0, 256, size=(b, h, w, 3)).astype(np.uint8)
    images[0, 0, 0, :], images[-1, -1, -1, :] = 0, 255
    return images


LAYOUTS = {
    "BHWC uint8": lambda rgb: (rgb, rgb),
    "BHWC uint8 RGBA": lambda rgb: (np.concatenate([rgb, np.full(rgb.shape[:3] + (1,), 7, np.uint8)], -1), rgb),
    "BCHW float32": lambda rgb: (rgb.transpose(0, 3, 1, 2).astype(np.float32), rgb),
    "BCHW float32 [-1, 1]": lambda rgb: (rgb.transpose(0, 3, 1, 2) / 127.5 - 1, rgb),
    "BHWC float16": lambda rgb: (rgb.astype(np.float16), rgb),
    "BHW float64 grey": lambda rgb: (rgb[..., 1].astype(np.float64), np.repeat(rgb[..., 1:2], 3, -1)),
    "BCHW uint8 grey": lambda rgb: (rgb[:, None, :, :, 0], np.repeat(rgb[..., :1], 3, -1)),
    "BHWC uint8 grey": lambda rgb: (rgb[..., 2:3], np.repeat(rgb[..., 2:3], 3, -1)),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tensorshow_pixels(tmp_path, layout):
    served, expected = LAYOUTS[layout](pixel_images())
    path = write_ten(tmp_path / "img.ten", [[np.ascontiguousarray(served)]])  # no labels: no text over pixels
    out = tmp_path / "img.png"
    with serve(path) as url:
        r = run_tool("tensorshow", "-o", out, url)
    assert r.returncode == 0, r.stderr
    got = read_png(out).astype(int)
    want = make_grid(expected).astype(int)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= (1 if "[-1, 1]" in layout else 0)


def class_files(tmp_path):
    files = {
        "none": None,
        "numbers as list": '["0", "1", "2"]',
        "names as object": '{"0": "tench", "1": "goldfish", "2": "shark"}',
        "names as list": '[\n  "tench",\n  "goldfish",\n  "shark"\n]',
        "names with keys in another order": '{"2": "shark", "0": "tench", "1": "goldfish"}',
        "names as imagenet index": '{"0": ["n01440764", "tench"], "1": ["n01443537", "goldfish"], '
                                   '"2": ["n01484850", "shark"]}',
    }
    paths = {}
    for name, text in files.items():
        if text is not None:
            paths[name] = tmp_path / (name.replace(" ", "_") + ".json")
            paths[name].write_text(text)
        else:
            paths[name] = None
    return paths


def test_tensorshow_class_names(tmp_path):
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(3, 40, 64, 3)).astype(np.uint8)
    path = write_ten(tmp_path / "cls.ten", [[images, np.array([0, 1, 2], np.int32)]])
    grids = {}
    with serve(path) as url:
        for name, classes in class_files(tmp_path).items():
            out = tmp_path / (name.replace(" ", "_") + ".png")
            r = run_tool("tensorshow", "-o", out, *(["-C", classes] if classes else []), url)
            assert r.returncode == 0, (name, r.stderr)
            grids[name] = read_png(out)
    # Labels are drawn: the grid is not the bare images.
    assert not np.array_equal(grids["none"], make_grid(images))
    # A name that is the number draws the same as no table; every spelling of the names draws the same.
    assert np.array_equal(grids["numbers as list"], grids["none"])
    assert not np.array_equal(grids["names as object"], grids["none"])
    for name in ("names as list", "names with keys in another order", "names as imagenet index"):
        assert np.array_equal(grids[name], grids["names as object"]), name


@pytest.mark.parametrize("text,where,what", [
    ('{"0": "tench",\n "1": goldfish}', "line 2, column 7", "invalid literal"),
    ('{0: "tench"}', "line 1, column 2", "expected string literal"),  # bare keys are not JSON
    ('["tench",]', "line 1, column 10", "unexpected ']'"),
    ('{"0": "tench", "0": "again"}', "line 1, column 18", "label 0 appears twice"),
    ('{"tench": "0"}', "line 1, column 8", 'key "tench" is not a class label'),
])
def test_tensorshow_bad_class_file(tmp_path, text, where, what):
    classes = tmp_path / "bad.json"
    classes.write_text(text)
    r = run_tool("tensorshow", "-C", classes, "-o", tmp_path / "x.png", silent_url())
    assert r.returncode == 1
    assert r.stderr.startswith(f"tensorshow: {classes}: {where}: ") and what in r.stderr, r.stderr
    assert not (tmp_path / "x.png").exists()


def test_tensorshow_refuses_batches_without_images(tmp_path):
    path = write_ten(tmp_path / "noimg.ten", [[np.arange(6, dtype=np.int32), np.zeros((6, 10), np.float32)]])
    with serve(path) as url:
        r = run_tool("tensorshow", "-o", tmp_path / "x.png", url)
    assert r.returncode == 1
    assert "holds no images" in r.stderr and "int32 (6,), float32 (6, 10)" in r.stderr, r.stderr


def test_tensorshow_window_needs_a_display(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    r = run_tool("tensorshow", "--window", silent_url(), env=env)
    assert r.returncode == 1 and "--window needs a display" in r.stderr, r.stderr


def keygen(tmp_path, name):
    r = subprocess.run([TENBIN, "keygen", str(tmp_path / name)], capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    return tmp_path / name, tmp_path / f"{name}_secret"


def test_curve_keygen_writes_a_private_secret_and_refuses_to_overwrite(tmp_path):
    public, secret = keygen(tmp_path, "server")
    assert os.stat(secret).st_mode & 0o777 == 0o600
    text = public.read_text()
    assert re.search(r'^curve\n    public-key = "[^"]{40}"$', text, re.M), text
    assert "secret-key" not in text and "secret-key" in secret.read_text()
    r = subprocess.run([TENBIN, "keygen", str(public)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert r.returncode == 1 and "will not overwrite" in r.stderr


def test_curve_only_allowed_clients_receive(tmp_path):
    """serve-ten as a CURVE server with an allow-list; tensormon as clients."""
    _, server_secret = keygen(tmp_path, "server")
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    _, client_secret = keygen(allowed, "trainer")
    os.rename(client_secret, tmp_path / "trainer_secret")  # the allow-list holds public certificates only
    _, stranger_secret = keygen(tmp_path, "stranger")
    server_public = tmp_path / "server"
    curve_server = ["--curve-secret", str(server_secret), "--curve-allow", str(allowed)]
    with serve(synth(tmp_path, 2, 8, 3), extra=curve_server) as url:
        ok = run_tool("tensormon", "--json", "-c", 3, "-r", 10, "--curve-secret", tmp_path / "trainer_secret",
                      "--curve-server", server_public, url)
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout.splitlines()[-1])["batches"] == 3
        for who in (["--curve-secret", stranger_secret, "--curve-server", server_public], []):
            r = run_tool("tensormon", "-c", 1, "-t", 1, "--timeout-exit", *who, url)
            assert r.returncode == 2, (who, r.stdout, r.stderr)
        ok = run_tool("tensormon", "--json", "-c", 1, "-r", 10, "--curve-secret", tmp_path / "trainer_secret",
                      "--curve-server", server_public, url)
        assert ok.returncode == 0, ok.stderr  # still serving the allowed one


def test_curve_flags_are_checked(tmp_path):
    public, secret = keygen(tmp_path, "k")
    r = run_tool("tensormon", "--curve-server", public, "-t", 1, "--timeout-exit", silent_url())
    assert r.returncode == 1 and "needs this side's secret certificate" in r.stderr, r.stderr
    r = run_tool("tensormon", "--curve-secret", public, "-t", 1, "--timeout-exit", silent_url())
    assert r.returncode == 1 and "holds no secret key" in r.stderr, r.stderr


# --- the reference's tensorshow flags -------------------------------------------------

def test_tensorshow_unbatched_takes_each_message_as_one_sample(tmp_path):
    rng = np.random.default_rng(4)
    image = rng.integers(0, 256, size=(6, 9, 3)).astype(np.uint8)
    image[0, 0], image[-1, -1] = 0, 255
    path = write_ten(tmp_path / "one.ten", [[image]])
    out = tmp_path / "one.png"
    with serve(path) as url:
        r = run_tool("tensorshow", "-b", "-o", out, url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("tensorshow: batch 0: 1 images uint8 (1, 6, 9, 3) BHWC"), r.stdout
    assert np.array_equal(read_png(out), make_grid(image[None]))
    with serve(path) as url:
        r = run_tool("tensorshow", "-o", out, url)  # without -b: a batch of 6 grey 9x3 images
    assert r.returncode == 0 and "6 images" in r.stdout, (r.stdout, r.stderr)


@pytest.mark.parametrize("switch", ["-B", "--perbatch"])
def test_tensorshow_perbatch_draws_the_first_images(tmp_path, switch):
    images = pixel_images(b=5)
    path = write_ten(tmp_path / "five.ten", [[images]])
    out = tmp_path / "two.png"
    with serve(path) as url:
        r = run_tool("tensorshow", switch, 2, "-o", out, url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("tensorshow: batch 0: 2 images uint8 (5, 5, 7, 3) BHWC"), r.stdout
    assert np.array_equal(read_png(out), make_grid(images[:2]))


@pytest.mark.parametrize("args,says", [(["-m", "img2img"], "-m img2img (the reference's pairs side by side) is not "
                                                            "drawn here"),
                                       (["--mode", "pictures"], "-m 'pictures': unknown mode"),
                                       (["-t", "-1"], "in the reference's tensorshow -t -1 kept each image up until "
                                                      "a key: here --window always does; leave -t out")])
def test_tensorshow_refuses_what_it_does_not_do_saying_what_to_use(args, says):
    r = run_tool("tensorshow", *args, silent_url())
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.splitlines()) == 1 and says in r.stderr, r.stderr


def test_tensorshow_mode_imgclass_is_the_grid(tmp_path):
    with serve(synth(tmp_path, 3, 8, 1)) as url:
        r = run_tool("tensorshow", "-m", "imgclass", "-o", tmp_path / "g.png", url)
    assert r.returncode == 0 and "3 images" in r.stdout, r.stderr


def test_tensorshow_listens_on_the_references_four_ports_by_default():
    r = run_tool("tensorshow", "--help")
    assert "default URLs zsub://127.0.0.1:{7880..7883}" in r.stdout, r.stdout


def test_serve_ten_replays_recorded_batches_without_their_receipt_requests(tmp_path):
    """Batches recorded from a confirming server ask for receipts to a server
    long gone; replayed twice, they would be confirmed to nobody and the
    second pass dropped as copies. serve-ten takes the request out."""
    import msgpack
    import zmq

    lists = []
    for seq in range(2):
        meta = {"keys": ["k%d" % seq], "shards": ["s"], "server": "gone:1", "seq": seq,
                "ack": ["tcp:9"], "run": 77, "stream": "0/1"}
        lists.append(([np.zeros((1, 2, 2, 3), np.uint8), np.array([seq], np.int32),
                       np.frombuffer(msgpack.packb(meta), np.uint8)], ["", "", "meta"]))
    path = tmp_path / "recorded.ten"
    with open(path, "wb") as f:
        for arrays, infos in lists:
            f.write(tb.encode_buffer(arrays, infos))
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    proc = subprocess.Popen([SERVE_TEN, "-i", str(path), "-g", "3", "--epochs", "2", f"zpush://127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        with killing(proc):
            metas = []
            while len(metas) < 4 and pull.poll(10000):
                arrays, infos = tb.decode_message(pull.recv_multipart(), with_infos=True)
                assert infos[-1] == "meta"
                metas.append(msgpack.unpackb(arrays[-1].tobytes(), raw=False))
            assert proc.wait(timeout=RUN_TIMEOUT_S) == 0
    finally:
        pull.close()
        ctx.term()
    assert [m["seq"] for m in metas] == [0, 1, 0, 1]
    assert all("ack" not in m and "run" not in m for m in metas), metas
    assert [m["keys"] for m in metas] == [["k0"], ["k1"], ["k0"], ["k1"]]
