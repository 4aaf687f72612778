"""Shards over http(s): a loopback HTTP server here (127.0.0.1, port 0)
serves generated tar shards whole, slowly, cut short, with a wrong
Content-Length, as 404s, redirect loops and failures that pass; read-shard
(ShardReader alone, with short timeouts) and serve-imagenet-shards read them.

Environment: TENSORCOM_BUILD_DIR, the meson build dir.
"""
import http.server
import io
import os
import random
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
import server_helpers as h  # noqa: E402

READ_SHARD = os.path.join(h.BUILD_DIR, "tests", "http", "read-shard")
if not os.access(READ_SHARD, os.X_OK):
    pytest.skip(f"read-shard not built (TENSORCOM_BUILD_DIR={h.BUILD_DIR!r})", allow_module_level=True)

RUN_TIMEOUT_S = 60  # one read-shard run; every case here needs a few seconds at most


# --- shards ----------------------------------------------------------------------

def make_tar(samples):
    """A tar (bytes) of samples: [(key, {ext: bytes})], members in order."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for key, members in samples:
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                info.mtime = 1700000000
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def data_offset(tar_bytes, name):
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        return tar.getmember(name).offset_data


def numbered_samples(count, size, seed):
    rng = random.Random(seed)
    return [(f"s{i:03d}", {"cls": str(i).encode(), "bin": rng.randbytes(size)}) for i in range(count)]


def weighted_sum(data):
    """As read-shard's: the sum of byte * (index + 1), modulo 2^64 (numpy's uint64 wraps)."""
    values = np.frombuffer(data, dtype=np.uint8).astype(np.uint64)
    return int(np.sum(values * np.arange(1, len(data) + 1, dtype=np.uint64), dtype=np.uint64))


def expected_lines(samples):
    """read-shard's lines for samples: key, and each member's size and weighted sum."""
    def member(ext, data):
        return f"{ext}:{len(data)}:{weighted_sum(data):x}"
    return [f"sample {key} " + " ".join(member(ext, data) for ext, data in members.items())
            for key, members in samples]


SMALL = numbered_samples(12, 3000, seed=1)
SMALL_TAR = make_tar(SMALL)
# Larger than the reader's 1 MiB high-water mark many times: curl is paused and resumed.
BIG = numbered_samples(5, 1536 * 1024, seed=2)
BIG_TAR = make_tar(BIG)
CUT_AT = data_offset(SMALL_TAR, "s005.bin") + 100  # inside s005: s000..s004 are whole
# Far more than the reader may hold at once.
HUGE = numbered_samples(48, 1024 * 1024, seed=3)
HUGE_TAR = make_tar(HUGE)


# --- the server ------------------------------------------------------------------

class Site:
    """A ThreadingHTTPServer on 127.0.0.1:0 whose paths behave as routes says;
    counts the requests of each path."""

    def __init__(self):
        self.requests = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()  # ends handlers that stall
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.split("?")[0]
                with site.lock:
                    site.requests[path] = site.requests.get(path, 0) + 1
                    nth = site.requests[path]
                route = ROUTES.get(path)
                if route is None:
                    self.send_error(404)
                else:
                    route(self, site, nth)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path, auth=""):
        return f"http://{auth}127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def head(handler, length, status=200, close=False):
    handler.send_response(status)
    handler.send_header("Content-Length", str(length))
    if close:
        handler.send_header("Connection", "close")
        handler.close_connection = True
    handler.end_headers()


def whole(body):
    def route(handler, site, nth):
        head(handler, len(body))
        handler.wfile.write(body)
    return route


def slow(body, piece=512, pause_s=0.01):
    def route(handler, site, nth):
        head(handler, len(body))
        for at in range(0, len(body), piece):
            handler.wfile.write(body[at:at + piece])
            handler.wfile.flush()
            time.sleep(pause_s)
    return route


def cut(body, at):
    """Declares the whole body, sends `at` bytes, closes."""
    def route(handler, site, nth):
        head(handler, len(body), close=True)
        handler.wfile.write(body[:at])
    return route


def declared(body, length):
    """Sends the whole body with a Content-Length of `length`, then closes."""
    def route(handler, site, nth):
        head(handler, length, close=True)
        handler.wfile.write(body)
    return route


def stalls(body, at):
    """Sends `at` bytes of the body, then nothing until the test ends."""
    def route(handler, site, nth):
        head(handler, len(body))
        handler.wfile.write(body[:at])
        handler.wfile.flush()
        site.stop.wait(120)
        handler.close_connection = True
    return route


def drips(body, piece=4, pause_s=0.1):
    """A byte or two at a time, never stopping long enough for a stall timeout."""
    def route(handler, site, nth):
        head(handler, len(body))
        for at in range(0, len(body), piece):
            if site.stop.is_set():
                break
            handler.wfile.write(body[at:at + piece])
            handler.wfile.flush()
            time.sleep(pause_s)
        handler.close_connection = True
    return route


def redirect(to):
    def route(handler, site, nth):
        handler.send_response(302)
        handler.send_header("Location", to)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
    return route


def status(code):
    def route(handler, site, nth):
        head(handler, 0, status=code)
    return route


def fails_first(times, failing, then):
    def route(handler, site, nth):
        (failing if nth <= times else then)(handler, site, nth)
    return route


ROUTES = {
    "/small.tar": whole(SMALL_TAR),
    "/big.tar": whole(BIG_TAR),
    "/huge.tar": whole(HUGE_TAR),
    "/slow.tar": slow(SMALL_TAR),
    "/cut.tar": cut(SMALL_TAR, CUT_AT),
    "/short-length.tar": declared(SMALL_TAR, CUT_AT),
    "/long-length.tar": declared(SMALL_TAR, len(SMALL_TAR) + 5000),
    "/stalls.tar": stalls(SMALL_TAR, CUT_AT),
    "/drips.tar": drips(SMALL_TAR),
    "/loop.tar": redirect("/loop.tar"),
    "/moved.tar": redirect("/small.tar"),
    "/to-file.tar": redirect("file:///etc/passwd"),
    "/error-500.tar": status(500),
    "/not-tar.tar": whole(b"<html>not a shard</html>" * 40),
    "/cut-twice.tar": fails_first(2, cut(SMALL_TAR, CUT_AT), whole(SMALL_TAR)),
    "/503-twice.tar": fails_first(2, status(503), whole(SMALL_TAR)),
}


@pytest.fixture
def site():
    s = Site()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def silent_url():
    """A port that accepts connections (the kernel's backlog) and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/never.tar"
    finally:
        listener.close()


class Result:
    def __init__(self, proc, seconds):
        self.rc = proc.returncode
        self.lines = proc.stdout.splitlines()
        self.stderr = proc.stderr
        self.seconds = seconds

    @property
    def samples(self):
        return [line for line in self.lines if line.startswith("sample ")]

    @property
    def last(self):
        return self.lines[-1] if self.lines else ""

    def __repr__(self):
        return f"rc={self.rc} in {self.seconds:.2f} s\n" + "\n".join(self.lines) + "\n" + self.stderr


def read_shard(url, *options, attempts=1, retry_ms=50, stall_ms=5000):
    args = [READ_SHARD, "--attempts", str(attempts), "--retry-ms", str(retry_ms), "--stall-ms", str(stall_ms),
            "--connect-ms", "5000", *options, url]
    start = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return Result(proc, time.monotonic() - start)


# --- ShardReader through read-shard ------------------------------------------------

def test_a_whole_shard_gives_every_sample_once(site):
    r = read_shard(site.url("/small.tar"))
    assert r.rc == 0 and r.last == "end", r
    assert r.samples == expected_lines(SMALL), r


def test_a_large_shard_streams_through_the_bounded_buffer(site):
    r = read_shard(site.url("/big.tar"))
    assert r.rc == 0 and r.last == "end", r
    assert r.samples == expected_lines(BIG), r


def peak_rss_bytes(url):
    """read-shard's peak resident memory reading url, and its output lines."""
    proc = subprocess.run([READ_SHARD, url], capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)
    peak = [int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("peak-kib ")]
    assert len(peak) == 1, proc.stderr
    return peak[0] * 1024, proc.stdout.splitlines()


def sanitized(exe):
    # ASan keeps freed memory in quarantine: RSS grows by design there.
    with open(exe, "rb") as f:
        return b"__asan_init" in f.read()


@pytest.mark.skipif(sanitized(READ_SHARD), reason="ASan's quarantine grows RSS by design")
def test_a_shard_is_streamed_never_held_whole(site):
    small_rss, _ = peak_rss_bytes(site.url("/small.tar"))
    huge_rss, lines = peak_rss_bytes(site.url("/huge.tar"))
    assert lines[:-1] == expected_lines(HUGE) and lines[-1] == "end", lines[-3:]
    # 48 MiB of shard; one 1 MiB member, curl's 1 MiB high-water mark and libarchive's blocks at a time.
    assert huge_rss - small_rss < 16 << 20, (small_rss, huge_rss)


def test_a_slow_server_is_read_correctly(site):
    r = read_shard(site.url("/slow.tar"), stall_ms=2000)
    assert r.rc == 0 and r.last == "end", r
    assert r.samples == expected_lines(SMALL), r


def test_a_redirect_is_followed(site):
    r = read_shard(site.url("/moved.tar"))
    assert r.rc == 0 and r.samples == expected_lines(SMALL), r


def test_a_body_cut_short_is_a_damaged_shard_after_its_retries(site):
    r = read_shard(site.url("/cut.tar"), attempts=3)
    assert r.rc == 1, r
    assert r.samples == expected_lines(SMALL[:5]), r  # each whole sample once, the cut one not
    assert r.last.startswith("error: " + site.url("/cut.tar") + ": "), r
    assert "(tried 3 times)" in r.last, r
    assert site.requests["/cut.tar"] == 3


def test_a_content_length_short_of_the_body_is_a_damaged_shard(site):
    # The transfer itself succeeds: the tar it gave is cut, and fetching it again would not help.
    r = read_shard(site.url("/short-length.tar"), attempts=3)
    assert r.rc == 1, r
    assert r.samples == expected_lines(SMALL[:5]), r
    assert r.last.startswith("error: truncated or corrupt"), r
    assert site.requests["/short-length.tar"] == 1


def test_a_content_length_past_a_complete_archive_costs_nothing(site):
    r = read_shard(site.url("/long-length.tar"), attempts=3)
    assert r.rc == 0 and r.last == "end", r
    assert r.samples == expected_lines(SMALL), r


def test_a_missing_shard_is_one_line_naming_url_and_status_and_not_retried(site):
    r = read_shard(site.url("/missing.tar"), attempts=3)
    assert r.rc == 1 and r.samples == [], r
    assert r.lines == ["error: " + site.url("/missing.tar") + ": HTTP status 404"], r
    assert site.requests["/missing.tar"] == 1


def test_a_server_error_is_retried_then_reported(site):
    r = read_shard(site.url("/error-500.tar"), attempts=3)
    assert r.rc == 1 and r.samples == [], r
    assert r.lines == ["error: " + site.url("/error-500.tar") + ": HTTP status 500 (tried 3 times)"], r
    assert site.requests["/error-500.tar"] == 3


def test_failures_that_pass_are_retried_with_back_off(site):
    r = read_shard(site.url("/503-twice.tar"), attempts=3, retry_ms=200)
    assert r.rc == 0 and r.samples == expected_lines(SMALL), r
    assert site.requests["/503-twice.tar"] == 3
    assert r.seconds >= 0.2 + 0.4, r  # waits of 200 ms, then 400 ms


def test_a_transfer_cut_twice_resumes_without_repeating_a_sample(site):
    r = read_shard(site.url("/cut-twice.tar"), attempts=3)
    assert r.rc == 0 and r.last == "end", r
    assert r.samples == expected_lines(SMALL), r  # s000..s004 given by the first attempt only
    assert site.requests["/cut-twice.tar"] == 3


def test_too_few_attempts_for_the_failures_end_the_shard(site):
    r = read_shard(site.url("/cut-twice.tar"), attempts=2)
    assert r.rc == 1 and r.samples == expected_lines(SMALL[:5]), r
    assert "(tried 2 times)" in r.last, r


def test_a_redirect_loop_fails_clearly(site):
    r = read_shard(site.url("/loop.tar"), "--max-redirects", "4", attempts=3)
    assert r.rc == 1 and r.samples == [], r
    assert r.last.startswith("error: " + site.url("/loop.tar") + ": "), r
    assert "redirect" in r.last.lower(), r
    assert site.requests["/loop.tar"] == 5  # the first request and 4 redirects, not retried


def test_a_redirect_to_another_protocol_is_refused(site):
    r = read_shard(site.url("/to-file.tar"), attempts=3)
    assert r.rc == 1 and r.samples == [], r
    assert site.requests["/to-file.tar"] == 1


def test_a_body_that_is_no_tar_is_a_damaged_shard(site):
    r = read_shard(site.url("/not-tar.tar"))
    assert r.rc == 1 and r.samples == [], r
    assert r.last.startswith("error: body is not an archive"), r


def test_a_server_that_never_answers_fails_within_the_stall_timeout(silent_url):
    r = read_shard(silent_url, stall_ms=1000)
    assert r.rc == 1, r
    assert "stall timeout" in r.last, r
    assert 0.9 <= r.seconds < 5, r


def test_a_server_that_stops_mid_body_fails_within_the_stall_timeouts(site):
    r = read_shard(site.url("/stalls.tar"), attempts=2, stall_ms=1000)
    assert r.rc == 1 and r.samples == expected_lines(SMALL[:5]), r
    assert "stall timeout" in r.last and "(tried 2 times)" in r.last, r
    assert r.seconds < 8, r
    assert site.requests["/stalls.tar"] == 2


def test_a_server_that_drips_bytes_fails_below_the_minimum_rate(site):
    """40 bytes/s never trips the stall timeout; the minimum rate ends it."""
    r = read_shard(site.url("/drips.tar"), "--min-rate", "1000", "--rate-window-ms", "1500", attempts=2,
                   stall_ms=5000)
    assert r.rc == 1, r
    assert "slower than the minimum of 1000 bytes/s" in r.last and "(tried 2 times)" in r.last, r
    assert r.seconds < 8, r


def test_a_slow_but_steady_server_is_above_the_minimum_rate(site):
    r = read_shard(site.url("/slow.tar"), "--min-rate", "1000", "--rate-window-ms", "500")
    assert r.rc == 0 and r.samples == expected_lines(SMALL), r


def test_a_transfer_that_runs_too_long_ends(site):
    r = read_shard(site.url("/drips.tar"), "--max-transfer-ms", "1000", "--min-rate", "0", attempts=3)
    assert r.rc == 1, r
    assert "the most a transfer may take" in r.last and "(tried" not in r.last, r
    assert r.seconds < 5, r


def test_a_refused_connection_is_retried_then_reported():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/gone.tar"
    r = read_shard(url, attempts=2)
    assert r.rc == 1 and r.samples == [], r
    assert r.last.startswith("error: " + url + ": ") and "(tried 2 times)" in r.last, r


def test_user_password_and_query_never_reach_messages(site):
    r = read_shard(site.url("/missing.tar?token=tok123", auth="alice:pw456@"))
    assert r.lines == ["error: " + site.url("/missing.tar") + "?...: HTTP status 404"], r
    assert "pw456" not in r.stderr and "tok123" not in r.stderr


# --- serve-imagenet-shards ---------------------------------------------------------

def image_samples(count):
    rng = np.random.default_rng(5)
    return [(f"img{i:02d}", {"jpg": h.encode(h.smooth_image(rng, 48, 64), "jpg"), "cls": h.cls(i % 3)})
            for i in range(count)]


IMAGES = image_samples(8)
ROUTES["/images.tar"] = whole(make_tar(IMAGES))
ROUTES["/images-stall.tar"] = stalls(make_tar(IMAGES), len(make_tar(IMAGES)) // 2)
SERVER_ARGS = ["--epochs", "1", "--meta", "-b", "4", "-w", "1", "--shuffle", "0", "--size", "32", "-r", "0"]


@pytest.fixture
def rundir():
    d = tempfile.mkdtemp(dir="/tmp", prefix="tch")
    yield d
    subprocess.run(["rm", "-rf", d], check=False)


@pytest.mark.skipif(not os.access(h.SHARDS_EXE, os.X_OK), reason="serve-imagenet-shards not built")
def test_the_server_serves_a_url_and_names_it_without_secrets(site, rundir):
    url = site.url("/images.tar?sig=tok789", auth="bob:pw123@")
    r = h.run_server(["-u", url, "-u", site.url("/missing.tar")] + SERVER_ARGS, rundir)
    assert r.rc == 0, r
    served, _, _, shard_errors = r.summary()
    assert served == len(IMAGES) and shard_errors == 1, r
    assert sorted(r.keys()) == [key for key, _ in IMAGES], r
    assert {s for m in r.metas for s in m["shards"]} == {site.url("/images.tar") + "?..."}, r
    assert site.url("/missing.tar") + ": HTTP status 404" in r.err, r
    for secret in ("pw123", "tok789", "bob"):
        assert secret not in r.out and secret not in r.err, r


@pytest.mark.skipif(not os.access(h.SHARDS_EXE, os.X_OK), reason="serve-imagenet-shards not built")
def test_a_signal_stops_a_server_whose_download_stalls(site, rundir):
    proc = subprocess.Popen([h.SHARDS_EXE, "-u", site.url("/images-stall.tar"), *SERVER_ARGS,
                             "zpush+ipc://" + os.path.join(rundir, "s")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while site.requests.get("/images-stall.tar", 0) == 0:
            assert time.monotonic() < deadline, "the server never asked for the shard"
            time.sleep(0.05)
        time.sleep(0.5)  # into the stall
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        assert time.monotonic() - start < 3, (out, err)
        assert proc.returncode == 0, (out, err)
        assert b": done: served " in out, (out, err)
        assert site.requests["/images-stall.tar"] == 1  # not fetched again
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


for name in "abc":
    ROUTES[f"/stall-{name}.tar"] = stalls(make_tar(IMAGES), len(make_tar(IMAGES)) // 2)


@pytest.mark.skipif(not os.access(h.SHARDS_EXE, os.X_OK), reason="serve-imagenet-shards not built")
def test_the_shards_after_a_stalled_one_are_fetched_while_it_waits(site, rundir):
    """Every shard stalls half-way (a stall timeout is a minute): whichever
    comes first in the epoch's order, the three after it are fetched while
    it waits, not one after another once it has failed. A stop signal then
    ends every transfer at once."""
    shards = ["/images-stall.tar", "/stall-a.tar", "/stall-b.tar", "/stall-c.tar"]
    args = [arg for shard in shards for arg in ("-u", site.url(shard))]
    proc = subprocess.Popen([h.SHARDS_EXE, *args, *SERVER_ARGS, "zpush+ipc://" + os.path.join(rundir, "s")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while not all(site.requests.get(shard, 0) for shard in shards):
            assert time.monotonic() < deadline, f"fetched so far: {site.requests}"
            time.sleep(0.05)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        assert time.monotonic() - start < 3, (out, err)
        assert proc.returncode == 0, (out, err)
        assert all(site.requests[shard] == 1 for shard in shards), site.requests
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
