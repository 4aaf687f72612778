"""The metrics endpoint (--metrics, Connection.serve_metrics) against hostile
HTTP clients: it is bound on 0.0.0.0 without authentication (docs/deploy.md),
so whoever reaches the port must not be able to grow its memory, blind
Prometheus' scrapes, hold its descriptors or delay a stop.

Run against tensormon, serve-ten and a Python trainer's serve_metrics. The
figures asserted are docs/security.md's ("The metrics endpoint"): 8 KiB a
request, 64 connections, 2 s to send a request. Environment: as
test_metrics_scrape.py (TENSORCOM_BUILD_DIR; PYTHONPATH with the bindings).
Every port is 0, every wait bounded, every process and socket closed.
"""

import os
import re
import select
import signal
import socket
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager, ExitStack

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import tenbin_ref as tb  # noqa: E402
from processes import running  # noqa: E402

BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
SERVE_TEN = os.path.join(BUILD_DIR, "servers", "serve-ten")
TENSORMON = os.path.join(BUILD_DIR, "tools", "tensormon")
METRICS_URL = re.compile(rb"metrics: (http://127\.0\.0\.1:(\d+)/metrics)")

MAX_CONNECTIONS = 64  # docs/security.md
SCRAPE_DELAY_S = 1.0  # the most a scrape may wait behind hostile clients
STOP_S = 2.0          # SIGTERM to exit with hostile clients connected

# A Python trainer serving its receiver metrics; SIGTERM ends it as
# `sys.exit`, which drops the Connection and with it the endpoint.
PYTHON_TRAINER = """
import signal, sys, time, tensorcom
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
connection = tensorcom.Connection("zsub://127.0.0.1:1")
print("metrics: " + connection.serve_metrics("127.0.0.1:0"), flush=True)
try:
    while True:
        time.sleep(0.05)
finally:
    del connection
"""


def need(path):
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: set TENSORCOM_BUILD_DIR to the meson build dir")
    return path


def wait_for_url(stream, timeout=20):
    """(url, port) from the line a program prints when its endpoint listens."""
    buf, deadline = b"", time.monotonic() + timeout
    while not METRICS_URL.search(buf):
        assert time.monotonic() < deadline, f"no metrics URL within {timeout} s: {buf!r}"
        if select.select([stream], [], [], 0.2)[0]:
            chunk = os.read(stream.fileno(), 4096)
            assert chunk, f"output closed before the metrics URL: {buf!r}"
            buf += chunk
    m = METRICS_URL.search(buf)
    return m.group(1).decode(), int(m.group(2))


@contextmanager
def endpoint(kind, tmp_path):
    """A process serving metrics on 127.0.0.1:0: yields (process, url, port)."""
    if kind == "tensormon":
        args, stream = [need(TENSORMON), "--metrics", "127.0.0.1:0", "zsub://127.0.0.1:1"], "stderr"
    elif kind == "serve-ten":
        # One batch of one byte: the server waits for a peer that never
        # comes, serving metrics meanwhile.
        ten = tmp_path / "one.ten"
        ten.write_bytes(tb.encode_buffer([np.zeros((1,), dtype=np.uint8)]))
        args = [need(SERVE_TEN), "-i", ten, "--metrics", "127.0.0.1:0", "zrpush://127.0.0.1:0"]
        stream = "stdout"
    else:
        pytest.importorskip("tensorcom")
        args, stream = [sys.executable, "-c", PYTHON_TRAINER], "stdout"
    with running(args) as proc:
        url, port = wait_for_url(getattr(proc, stream))
        yield proc, url, port


def scrape_seconds(url):
    """Seconds one scrape took; fails if it does not come back whole."""
    start = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert b"tensorcom_" in response.read()
    return time.monotonic() - start


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024


def descriptors(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def connect(port, stack):
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    stack.callback(c.close)
    return c


def closed_by_peer(c, within):
    """True if the peer closes c (EOF or reset) within `within` seconds;
    whatever it answered first is read and ignored."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        c.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            if not c.recv(65536):
                return True
        except socket.timeout:
            return False
        except OSError:
            return True
    return False


class Slowloris(threading.Thread):
    """A client that sends an endless header, one byte every `gap` seconds,
    and reconnects whenever it is dropped."""

    def __init__(self, port, gap=0.2):
        super().__init__(daemon=True)
        self.port, self.gap = port, gap
        self.stopped = threading.Event()
        self.drops = 0

    def run(self):
        while not self.stopped.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as c:
                    c.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
                    while not self.stopped.wait(self.gap):
                        c.sendall(b"a")
            except OSError:
                self.drops += 1

    def stop(self):
        self.stopped.set()
        self.join(timeout=10)


ENDPOINTS = ["tensormon", "serve-ten", "python"]


@pytest.mark.parametrize("kind", ENDPOINTS)
def test_a_huge_request_line_is_cut_off_without_growing_memory(kind, tmp_path):
    with endpoint(kind, tmp_path) as (proc, url, port), ExitStack() as stack:
        scrape_seconds(url)  # the first scrape's allocations are not the attacker's
        before = rss_bytes(proc.pid)
        c = connect(port, stack)
        chunk, sent, cut = b"A" * (1 << 20), 0, False
        try:
            while sent < (64 << 20):  # 64 MiB of request line, no newline
                c.sendall(chunk)
                sent += len(chunk)
        except OSError:
            cut = True  # the endpoint closed on us: what we want
        grown = rss_bytes(proc.pid) - before
        assert grown < (4 << 20), f"{grown / 2**20:.1f} MiB more after {sent >> 20} MiB of request line"
        assert cut or closed_by_peer(c, 3), "the connection stayed open"
        assert scrape_seconds(url) < SCRAPE_DELAY_S
        assert proc.poll() is None


@pytest.mark.parametrize("kind", ["tensormon", "python"])
def test_idle_connections_do_not_delay_a_scrape(kind, tmp_path):
    with endpoint(kind, tmp_path) as (proc, url, port), ExitStack() as stack:
        for _ in range(50):
            connect(port, stack)  # connected, says nothing
        time.sleep(0.2)  # let the endpoint accept them
        assert scrape_seconds(url) < SCRAPE_DELAY_S
        # More connections than the cap: a scrape still gets through.
        for _ in range(2 * MAX_CONNECTIONS):
            connect(port, stack)
        time.sleep(0.2)
        assert scrape_seconds(url) < SCRAPE_DELAY_S


@pytest.mark.parametrize("kind", ["tensormon", "python"])
def test_slowloris_clients_do_not_blind_scrapes_and_are_dropped(kind, tmp_path):
    with endpoint(kind, tmp_path) as (proc, url, port):
        slow = [Slowloris(port) for _ in range(4)]
        for s in slow:
            s.start()
        try:
            time.sleep(0.5)
            for _ in range(5):
                assert scrape_seconds(url) < SCRAPE_DELAY_S
                time.sleep(0.3)
            # A request must be whole within a deadline, however steadily
            # its bytes come: every slow client has been dropped by now.
            deadline = time.monotonic() + 5
            while not all(s.drops for s in slow):
                assert time.monotonic() < deadline, [s.drops for s in slow]
                time.sleep(0.1)
        finally:
            for s in slow:
                s.stop()


def test_connections_beyond_the_cap_are_closed_and_descriptors_stay_bounded(tmp_path):
    with endpoint("tensormon", tmp_path) as (proc, url, port), ExitStack() as stack:
        baseline = descriptors(proc.pid)
        held = [connect(port, stack) for _ in range(4 * MAX_CONNECTIONS)]
        time.sleep(0.5)
        # The endpoint holds at most the cap, whatever the clients do.
        assert descriptors(proc.pid) - baseline <= MAX_CONNECTIONS
        closed = sum(closed_by_peer(c, 0.05) for c in held)
        assert closed >= len(held) - MAX_CONNECTIONS, f"{closed} of {len(held)} closed"
        assert scrape_seconds(url) < SCRAPE_DELAY_S


@pytest.mark.parametrize("kind", ENDPOINTS)
def test_a_stop_is_not_delayed_by_idle_or_slow_clients(kind, tmp_path):
    with endpoint(kind, tmp_path) as (proc, url, port), ExitStack() as stack:
        # The slow client first, so that a server taking connections one at
        # a time is busy with it when the stop comes.
        slow = Slowloris(port)
        slow.start()
        stack.callback(slow.stop)
        time.sleep(0.5)
        for _ in range(20):
            connect(port, stack)
        half = connect(port, stack)
        half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # a request never finished
        time.sleep(0.5)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except Exception:
            pytest.fail("still running 10 s after the stop signal")
        took = time.monotonic() - start
        assert took < STOP_S, f"stopped after {took:.1f} s"
