"""Prometheus metrics (--metrics HOST:PORT) of serve-imagenet-shards,
serve-ten and tensormon, scraped over HTTP while batches flow and parsed
with Debian's python3-prometheus-client; tensormon's bottleneck word; and
the Grafana dashboard's metric names checked against real scrapes.

Environment: TENSORCOM_BUILD_DIR (the meson build dir), TENSORCOM_SOURCE_DIR
(the checkout, for examples/grafana). Every port is 0 (the programs print
what they bound); every process is killed in a finally, every wait bounded.
"""

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager

import numpy as np
import pytest
import zmq

prometheus_parser = pytest.importorskip("prometheus_client.parser")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import tenbin_ref as tb  # noqa: E402
from processes import running  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "servers"))
import server_helpers as h  # noqa: E402

BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
SOURCE_DIR = os.environ.get("TENSORCOM_SOURCE_DIR", os.path.join(HERE, "..", ".."))
SHARDS_EXE = os.path.join(BUILD_DIR, "servers", "serve-imagenet-shards")
SERVE_TEN = os.path.join(BUILD_DIR, "servers", "serve-ten")
TENSORMON = os.path.join(BUILD_DIR, "tools", "tensormon")
DASHBOARD = os.path.join(SOURCE_DIR, "examples", "grafana", "tensorcom-dashboard.json")

LINE_TIMEOUT_S = 20
RUN_TIMEOUT_S = 60
METRICS_URL = re.compile(r"metrics: (http://127\.0\.0\.1:\d+/metrics)")


# --- processes and scrapes -------------------------------------------------------

def need(path):
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: set TENSORCOM_BUILD_DIR to the meson build dir")
    return path


class Lines:
    """Lines of a pipe read without blocking past a deadline; keeps them all."""

    def __init__(self, stream):
        self.fd = stream.fileno()
        self.buf = b""
        self.lines = []

    def wait_for(self, pattern, timeout=LINE_TIMEOUT_S):
        """The first match of pattern in a line (earlier lines included)."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines:
                m = re.search(pattern, line)
                if m:
                    return m
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                pytest.fail(f"no line matching {pattern!r} within {timeout} s; so far {self.lines!r}")
            chunk = os.read(self.fd, 65536)
            if not chunk:
                pytest.fail(f"output closed before a line matching {pattern!r}; so far {self.lines!r}")
            self.buf += chunk
            *complete, self.buf = self.buf.split(b"\n")
            self.lines += [c.decode(errors="replace") for c in complete]


def scrape(url):
    """{sample name: {frozenset of label items: value}}, and the families by name."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    samples, families = {}, {}
    for family in prometheus_parser.text_string_to_metric_families(text):
        families[family.name] = family
        for s in family.samples:
            samples.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return samples, families


def value(samples, name, **labels):
    assert name in samples, f"{name} not scraped; have {sorted(samples)}"
    return samples[name][frozenset(labels.items())]


# --- shards ----------------------------------------------------------------------

def make_shards(tmp_path, good=30, corrupt=1):
    """Two shards: `good` JPEG samples and `corrupt` images that are not images."""
    rng = np.random.default_rng(0)
    samples = [(f"s{i:04d}", {"jpg": h.encode(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8), "jpg"),
                              "cls": h.cls(i % 5)}) for i in range(good)]
    samples += [(f"bad{i}", {"jpg": b"\xff\xd8 not really a JPEG", "cls": b"1"}) for i in range(corrupt)]
    half = len(samples) // 2
    paths = [tmp_path / "a.tar", tmp_path / "b.tar"]
    h.write_tar(str(paths[0]), samples[:half])
    h.write_tar(str(paths[1]), samples[half:])
    return paths


# --- the image server ------------------------------------------------------------

def test_image_server_metrics_follow_what_the_consumer_receives(tmp_path):
    need(SHARDS_EXE)
    good, batch = 30, 4
    shards = make_shards(tmp_path, good=good, corrupt=1)
    total = good + 1  # the corrupt sample's place is filled by its neighbour
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    pull.setsockopt(zmq.RCVHWM, 1)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    args = [SHARDS_EXE, "-u", shards[0], "-u", shards[1], "--epochs", "1", "-b", batch, "-w", "2", "--size", "16",
            "--shuffle", "0", "--report", "0", "--hwm", "1", "--metrics", "127.0.0.1:0", "--metrics-hold", "60",
            f"zpush://127.0.0.1:{port}"]
    try:
        with running(args) as proc:
            out = Lines(proc.stdout)
            url = out.wait_for(METRICS_URL).group(1)
            first, families = scrape(url)
            # Every family is there before the first batch, with its type.
            assert families["tensorcom_server_samples"].type == "counter"
            assert families["tensorcom_server_queue_depth"].type == "gauge"
            assert value(first, "tensorcom_server_workers") == 2
            received, batches, payload, scraped = 0, 0, 0, []
            poller = zmq.Poller()
            poller.register(pull, zmq.POLLIN)
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while received < total:
                assert time.monotonic() < deadline, f"received {received} of {total}"
                if not poller.poll(200):
                    continue
                arrays = tb.decode_message(pull.recv_multipart())
                received += arrays[0].shape[0]
                batches += 1
                payload += sum(a.nbytes for a in arrays)
                samples, _ = scrape(url)
                # Counted once handed to ZeroMQ: the batch just received may
                # not be counted yet, later ones may be.
                sent = value(samples, "tensorcom_server_samples_total")
                assert received - batch <= sent <= total
                scraped.append(sent)
            assert scraped == sorted(scraped), "a counter went down"
            out.wait_for(r": done: served")
            final, _ = scrape(url)
            assert value(final, "tensorcom_server_samples_total") == received == total
            assert value(final, "tensorcom_server_batches_total") == batches == -(-total // batch)
            assert value(final, "tensorcom_server_sent_bytes_total") == payload
            assert value(final, "tensorcom_server_skipped_samples_total", reason="undecodable") == 1
            assert value(final, "tensorcom_server_replaced_samples_total", reason="undecodable") == 1
            # Every reason is exported from the start, at 0 until it happens:
            # a dashboard's query for one finds its series on a healthy server.
            for reason in ("empty", "truncated", "too many pixels", "too many scans", "no image", "too large",
                           "unreadable file", "missing label", "bad label", "label out of range"):
                assert value(final, "tensorcom_server_skipped_samples_total", reason=reason) == 0, reason
            assert value(final, "tensorcom_server_shard_errors_total") == 0
            for stage in ("read", "decode", "augment", "send_blocked"):
                assert value(final, "tensorcom_server_stage_seconds_total", stage=stage) > 0, stage
            assert value(final, "tensorcom_server_queue_depth", queue="decode") == 0
            assert value(final, "tensorcom_server_queue_depth", queue="send") == 0
            assert value(final, "tensorcom_server_subscribers") == 0  # PUSH has none
            # The hold ends at a stop signal.
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
    finally:
        pull.close()
        ctx.term()


def test_a_truncated_shard_counts_as_a_shard_error(tmp_path):
    need(SHARDS_EXE)
    shards = make_shards(tmp_path, good=6, corrupt=0)
    data = shards[1].read_bytes()
    shards[1].write_bytes(data[:700])  # inside the first member's data
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    args = [SHARDS_EXE, "-u", shards[0], "-u", shards[1], "--epochs", "1", "-b", 2, "-w", 1, "--size", 16,
            "--metrics", "127.0.0.1:0", "--metrics-hold", 60, f"zpush://127.0.0.1:{port}"]
    try:
        with running(args) as proc:
            out = Lines(proc.stdout)
            url = out.wait_for(METRICS_URL).group(1)
            received = 0
            while not any(": done: served" in line for line in out.lines) or pull.poll(500):
                if pull.poll(200):
                    received += tb.decode_message(pull.recv_multipart())[0].shape[0]
                else:
                    out.wait_for(r": done: served")
            final, _ = scrape(url)
            assert value(final, "tensorcom_server_shard_errors_total") == 1
            assert value(final, "tensorcom_server_samples_total") == received == 3
    finally:
        pull.close()
        ctx.term()


def test_bad_metrics_addresses_are_refused(tmp_path):
    shards = make_shards(tmp_path, good=2, corrupt=0)
    for bad in ("127.0.0.1", "127.0.0.1:70000", ":1"):
        r = subprocess.run([need(SHARDS_EXE), "-u", shards[0], "--metrics", bad, "zrpush://127.0.0.1:0"],
                           capture_output=True, text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert r.returncode != 0 and "metrics address" in r.stderr, (bad, r.stderr)


# --- serve-ten and tensormon -----------------------------------------------------

def write_ten(path, n, b=4, s=8):
    rng = np.random.default_rng(1)
    with open(path, "wb") as f:
        for _ in range(n):
            images = rng.integers(0, 255, (b, s, s, 3), dtype=np.uint8)
            f.write(tb.encode_buffer([images, np.arange(b, dtype=np.int32)]))
    return path


@contextmanager
def serve_ten(path, *extra):
    """serve-ten over PUSH on 127.0.0.1:0; yields (process, its lines, the zrpull URL)."""
    args = [need(SERVE_TEN), "-i", path, *extra, "zrpush://127.0.0.1:0"]
    with running(args) as proc:
        out = Lines(proc.stdout)
        port = out.wait_for(r"\[bound tcp://127\.0\.0\.1:(\d+)\]").group(1)
        yield proc, out, f"zrpull://127.0.0.1:{port}"


def test_serve_ten_and_tensormon_count_the_same_batches(tmp_path):
    n, b = 12, 4
    path = write_ten(tmp_path / "x.ten", n, b=b)
    with serve_ten(path, "--metrics", "127.0.0.1:0", "--metrics-hold", 60) as (server, out, url):
        server_url = out.wait_for(METRICS_URL).group(1)
        with running([need(TENSORMON), "--json", "-r", 1000, "--metrics", "127.0.0.1:0", url]) as mon:
            mon_url = Lines(mon.stderr).wait_for(METRICS_URL).group(1)
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while value(scrape(mon_url)[0], "tensorcom_receiver_batches_total") < n:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            received, families = scrape(mon_url)
            sent, _ = scrape(server_url)
            assert families["tensorcom_receiver_malformed_messages"].type == "counter"
            for name in ("batches", "samples"):
                assert value(received, f"tensorcom_receiver_{name}_total") == n * (1 if name == "batches" else b)
                assert value(sent, f"tensorcom_server_{name}_total") == n * (1 if name == "batches" else b)
            assert value(received, "tensorcom_receiver_received_bytes_total") == \
                value(sent, "tensorcom_server_sent_bytes_total") == n * (b * 8 * 8 * 3 + b * 4)
            assert value(received, "tensorcom_receiver_blocked_seconds_total") >= 0
            assert sum(received["tensorcom_receiver_malformed_messages_total"].values()) == 0
            mon.send_signal(signal.SIGINT)
            mon.wait(timeout=10)


def test_tensormon_counts_malformed_messages_by_kind_and_time_blocked(tmp_path):
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    try:
        with running([need(TENSORMON), "-r", 1000, "--metrics", "127.0.0.1:0",
                      f"zrpull://127.0.0.1:{port}"]) as mon:
            mon_url = Lines(mon.stderr).wait_for(METRICS_URL).group(1)
            time.sleep(0.5)  # tensormon waits for data: blocked
            frames = tb.encode_frames([np.zeros((2,), dtype=np.int32)])
            push.send_multipart(frames + frames[:1])           # a header without its data
            push.send_multipart([b"not a header", b"data"])  # a header that is not one
            push.send_multipart(tb.encode_frames([np.arange(3, dtype=np.int32)]))
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while value(scrape(mon_url)[0], "tensorcom_receiver_batches_total") < 1:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            samples, _ = scrape(mon_url)
            malformed = {dict(k)["kind"]: v for k, v in samples["tensorcom_receiver_malformed_messages_total"].items()}
            assert sum(malformed.values()) == 2, {k: v for k, v in malformed.items() if v}
            nonzero = {k: v for k, v in malformed.items() if v}
            assert nonzero == {"bad header": 1, "odd frame count": 1}, nonzero
            assert value(samples, "tensorcom_receiver_blocked_seconds_total") >= 0.3
            mon.send_signal(signal.SIGINT)
            mon.wait(timeout=10)
    finally:
        push.close()
        ctx.term()


def test_python_connection_serves_receiver_metrics(tmp_path):
    tensorcom = pytest.importorskip("tensorcom")
    n, b = 5, 4
    path = write_ten(tmp_path / "p.ten", n, b=b)
    with serve_ten(path) as (_, _, url):
        connection = tensorcom.Connection(url, timeout=RUN_TIMEOUT_S)
        try:
            metrics_url = connection.serve_metrics("127.0.0.1:0")
            assert METRICS_URL.search("metrics: " + metrics_url), metrics_url
            with pytest.raises(tensorcom.ArgumentError, match="already serves metrics"):
                connection.serve_metrics("127.0.0.1:0")
            for _ in range(n):
                connection.recv()
            samples, _ = scrape(metrics_url)
            assert value(samples, "tensorcom_receiver_batches_total") == n
            assert value(samples, "tensorcom_receiver_samples_total") == n * b
            assert value(samples, "tensorcom_receiver_blocked_seconds_total") == \
                pytest.approx(connection.stats.blocked_seconds, abs=1e-6)
        finally:
            connection.close()


def test_hostile_http_clients_cannot_stop_scrapes(tmp_path):
    """Silent connections, an oversized request, binary junk and a request
    for another path: each is answered or dropped within the endpoint's
    short read timeout, and a scrape after them still gets its metrics."""
    import socket
    with running([need(TENSORMON), "--metrics", "127.0.0.1:0", "zsub://127.0.0.1:1"]) as mon:
        url = Lines(mon.stderr).wait_for(METRICS_URL).group(1)
        port = int(re.search(r":(\d+)/metrics", url).group(1))
        held = []
        try:
            for _ in range(3):  # say nothing, keep the connection open
                held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            for payload in (b"GET /metrics HTTP/1.1\r\nX-Long: " + b"a" * 200000 + b"\r\n\r\n",
                            bytes(range(256)) * 64,
                            b"GET /nothing-here HTTP/1.1\r\nHost: x\r\n\r\n"):
                c = socket.create_connection(("127.0.0.1", port), timeout=5)
                held.append(c)
                try:
                    c.sendall(payload)
                except OSError:
                    pass  # the endpoint may close on us mid-request: fine
            start = time.monotonic()
            samples, _ = scrape(url)
            assert "tensorcom_receiver_batches_total" in samples
            assert time.monotonic() - start < 8, "the scrape waited behind the hostile clients too long"
        finally:
            for c in held:
                c.close()
        assert mon.poll() is None, "tensormon died"


# --- the bottleneck --------------------------------------------------------------

def bottleneck_of(tmp_path, server_args, monitor_args, n=60):
    path = write_ten(tmp_path / "b.ten", 10)
    with serve_ten(path, "--epochs", 0, *server_args) as (_, _, url):
        r = subprocess.run([need(TENSORMON), "--json", "-c", str(n), "-r", "10", *map(str, monitor_args), url],
                           capture_output=True, text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    objects = [json.loads(line) for line in r.stdout.splitlines()]
    return objects[-1], objects[:-1]


def test_tensormon_names_a_slow_producer(tmp_path):
    summary, reports = bottleneck_of(tmp_path, ["--rate", 50], [])
    assert summary["bottleneck"] == "producer" and summary["waiting"] > 0.7, summary
    # The batches the server queued while tensormon connected arrive as a
    # burst (seen once: 29,000 batches/s over the first two intervals, judged
    # "consumer"); once they are drained, every interval waits on the producer.
    assert reports[-1]["bottleneck"] == "producer", reports


def test_tensormon_names_a_slow_consumer(tmp_path):
    summary, reports = bottleneck_of(tmp_path, [], ["--step-ms", 20])
    assert summary["bottleneck"] == "consumer" and summary["waiting"] < 0.3, summary
    assert reports[-1]["bottleneck"] == "consumer", reports


def test_tensormon_prints_the_bottleneck_in_its_lines(tmp_path):
    path = write_ten(tmp_path / "c.ten", 10)
    # Lines at least half a second apart: 2.2 s of batches for four of them.
    with serve_ten(path, "--epochs", 0, "--rate", 100) as (_, _, url):
        r = subprocess.run([need(TENSORMON), "-c", "220", "-r", "10", url], capture_output=True, text=True,
                           timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) >= 4, r.stdout
    # The first intervals may be a burst the server queued (up to its and
    # tensormon's high-water marks) before tensormon read, as after a slow
    # start under a sanitizer: they prove nothing either way.
    for line in lines[2:]:
        assert re.search(r"; bottleneck: producer \(waiting \d+%\)$", line), line


# --- the Grafana dashboard -------------------------------------------------------

def test_dashboard_uses_only_scraped_metrics(tmp_path):
    with open(DASHBOARD, encoding="utf-8") as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert exprs, "no panel queries anything"
    referenced = {name for e in exprs for name in re.findall(r"\btensorcom_[a-z_]+", e)}
    # Counters are graphed as rates, never as raw totals.
    for e in exprs:
        for name in re.findall(r"\btensorcom_[a-z_]+_total\b", e):
            assert re.search(r"(rate|increase)\(\s*" + name, e), e

    shards = make_shards(tmp_path, good=4, corrupt=1)
    names = set()
    with running([need(SHARDS_EXE), "-u", shards[0], "-u", shards[1], "--epochs", 0, "-b", 2, "-w", 1,
                  "--size", 16, "--metrics", "127.0.0.1:0", "zpub://127.0.0.1:0"]) as server:
        names |= set(scrape(Lines(server.stdout).wait_for(METRICS_URL).group(1))[0])
    with running([need(TENSORMON), "--metrics", "127.0.0.1:0", "zsub://127.0.0.1:1"]) as mon:
        names |= set(scrape(Lines(mon.stderr).wait_for(METRICS_URL).group(1))[0])
    # A family with no sample yet (skips by reason) still has a name.
    names.add("tensorcom_server_skipped_samples_total")
    missing = referenced - names
    assert not missing, f"the dashboard queries metrics no program exports: {sorted(missing)}"
    assert {"tensorcom_server_samples_total", "tensorcom_receiver_blocked_seconds_total"} <= referenced
