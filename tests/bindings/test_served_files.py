"""A .ten file cut while serve-ten serves it or after tenbin.load() read it
(no SIGBUS: the files are read, not mapped), files kept in memory within
serve-ten's --cache-bytes, and serve-ten --rate as a cap over every window
(no catch-up burst after a stall).

Environment (set by meson test): PYTHONPATH (<build>/bindings),
TENSORCOM_BUILD_DIR (servers/serve-ten, tools/tenbin). Every process and
receive is bounded in time.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tensorcom
from tensorcom import tenbin

BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
SERVE_TEN = os.path.join(BUILD_DIR, "servers", "serve-ten")
TENBIN = os.path.join(BUILD_DIR, "tools", "tenbin")
TIMEOUT_S = 10  # one receive, one process' exit


@pytest.fixture(autouse=True)
def need_binaries():
    for path in (SERVE_TEN, TENBIN):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is missing: set TENSORCOM_BUILD_DIR to the meson build dir")


def synth(path, batches, size):
    """batches lists of [uint8 (8, size, size, 3), int32 (8,)]."""
    subprocess.run([TENBIN, "synth", "-b", "8", "-s", str(size), "-n", str(batches), "-o", str(path)], check=True,
                   timeout=60, capture_output=True)
    return path


def start_serve_ten(args):
    proc = subprocess.Popen([SERVE_TEN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def test_serve_ten_survives_its_file_being_cut(tmp_path, ipc_dir):
    # 64 batches of 8 x 256 x 256 x 3 (1.5 MiB each), read one at a time
    # (none kept in memory); the file is cut to a few batches while most
    # are still unsent.
    path = synth(tmp_path / "big.ten", 64, 256)
    url = f"ipc://{ipc_dir}/cut"
    proc = start_serve_ten(["-i", str(path), "--epochs", "0", "--hwm", "1", "--cache-bytes", "0", "zpush+" + url])
    try:
        with tensorcom.Connection("zpull+" + url, timeout=TIMEOUT_S, recv_hwm=1) as pull:
            for _ in range(3):
                pull.recv()
            os.truncate(path, 5 * 1024 * 1024 + 100)  # mid-batch
            deadline = time.monotonic() + TIMEOUT_S
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    pull.recv(timeout=0.5)
                except TimeoutError:
                    pass
    finally:
        code = stop(proc)
    err = proc.stderr.read()
    assert code != -signal.SIGBUS, f"serve-ten died of SIGBUS: {err}"
    # It goes on or stops with one line naming the file; nothing else.
    assert code in (0, 1), (code, err)
    if code == 1:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "big.ten" in lines[0], err


def receive_epochs(url, count):
    with tensorcom.Connection("zpull+" + url, timeout=TIMEOUT_S) as pull:
        return [pull.recv() for _ in range(count)]


def same_batches(got, expected):
    return len(got) == len(expected) and all(
        len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b)) for a, b in zip(got, expected))


def test_files_that_fit_are_sent_from_memory_as_read_at_the_start(tmp_path, ipc_dir):
    path = synth(tmp_path / "kept.ten", 6, 64)
    expected = tenbin.load_lists(str(path))
    url = f"ipc://{ipc_dir}/kept"
    proc = start_serve_ten(["-i", str(path), "--epochs", "2", "zpush+" + url])
    try:
        assert "lists on" in proc.stdout.readline()
        os.truncate(path, 0)  # read already: both epochs come from memory
        got = receive_epochs(url, 2 * len(expected))
        assert proc.wait(TIMEOUT_S) == 0, proc.stderr.read()
    finally:
        stop(proc)
    assert same_batches(got, expected + expected)


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_a_receiver_behind_a_finished_sender_still_gets_every_batch(tmp_path, ipc_dir, transport):
    # serve-ten has sent all 12 lists and closes while the receiver, with a
    # queue of one, has read none: the kernel holds the rest, and the
    # receiver still reads it all (within serve-ten's 2 s linger).
    path = synth(tmp_path / "late.ten", 6, 64)
    expected = tenbin.load_lists(str(path))
    url = f"ipc://{ipc_dir}/late" if transport == "ipc" else "tcp://127.0.0.1:0"
    with tensorcom.Connection("zpull+" + url, timeout=TIMEOUT_S, recv_hwm=1) as pull:
        proc = start_serve_ten(["-i", str(path), "--epochs", "2", "zpush+" + pull.bound_addresses[0]])
        try:
            said = [proc.stdout.readline()]  # "... lists on", maybe "waiting ...", then "done"
            while len(said) < 3 and "done" not in said[-1]:
                said.append(proc.stdout.readline())
            assert "done, 12 batches" in said[-1], said
            time.sleep(0.5)  # serve-ten closes meanwhile
            got = [pull.recv() for _ in range(len(expected) * 2)]
            assert proc.wait(TIMEOUT_S) == 0, proc.stderr.read()
        finally:
            stop(proc)
    assert same_batches(got, expected + expected)


@pytest.mark.parametrize("cache_bytes", ["0", "1000000"])
def test_files_past_the_cache_are_read_as_sent_and_said_so(tmp_path, ipc_dir, cache_bytes):
    # Two files of 6 lists, 590 KB and 2.4 MB: the second does not fit in
    # 1000000 bytes, neither fits in 0; either way every list comes, twice,
    # through reused read buffers.
    first, second = synth(tmp_path / "a.ten", 6, 64), synth(tmp_path / "b.ten", 6, 128)
    expected = tenbin.load_lists(str(first)) + tenbin.load_lists(str(second))
    url = f"ipc://{ipc_dir}/read"
    proc = start_serve_ten(["-i", str(first), "-i", str(second), "--epochs", "2", "--cache-bytes", cache_bytes,
                            "zpush+" + url])
    try:
        assert "12 lists on" in proc.stdout.readline()
        said = proc.stdout.readline()
        read_as_sent = 2 if cache_bytes == "0" else 1
        assert f"serve-ten: {read_as_sent} of 2 files are read as they are sent" in said, said
        got = receive_epochs(url, 2 * len(expected))
        assert proc.wait(TIMEOUT_S) == 0, proc.stderr.read()
    finally:
        stop(proc)
    assert same_batches(got, expected + expected)


@pytest.mark.parametrize("value, message", [("-1", "--cache-bytes -1: expected 0 or more bytes"),
                                            ("1e99", "'--cache-bytes' is invalid"),
                                            ("99999999999999999999999", "'--cache-bytes' is invalid")])
def test_a_bad_cache_size_is_refused_naming_it(tmp_path, value, message):
    path = synth(tmp_path / "one.ten", 1, 8)
    done = subprocess.run([SERVE_TEN, "-i", str(path), "--cache-bytes", value, "zpush+ipc:///nowhere/x"],
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode != 0 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_load_then_cut_touches_every_array_without_a_crash(tmp_path):
    path = synth(tmp_path / "load.ten", 16, 128)
    script = textwrap.dedent(f"""
        import os
        from tensorcom import tenbin
        arrays = tenbin.load({str(path)!r})
        os.truncate({str(path)!r}, 0)
        total = sum(int(a.astype('int64').sum()) for a in arrays)
        for a in arrays:
            a[...] = 0  # writable: our own memory, not the file
        print(len(arrays), total)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.split()[0] == "32"


def test_load_lists_then_cut_touches_every_array_without_a_crash(tmp_path):
    path = synth(tmp_path / "lists.ten", 16, 128)
    script = textwrap.dedent(f"""
        import os
        from tensorcom import tenbin
        lists = tenbin.load_lists({str(path)!r})
        os.truncate({str(path)!r}, 1000)
        print(len(lists), sum(int(a.sum()) for arrays in lists for a in arrays) >= 0)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.split() == ["16", "True"]


def test_load_of_a_file_cut_short_is_an_error_not_a_crash(tmp_path):
    path = synth(tmp_path / "short.ten", 4, 64)
    os.truncate(path, os.path.getsize(path) - 1000)
    with pytest.raises(Exception, match="short.ten"):
        tenbin.load(str(path))


def most_in_any_window(times, window_s):
    times = sorted(times)
    most, first = 0, 0
    for last, t in enumerate(times):
        while t - times[first] > window_s:
            first += 1
        most = max(most, last - first + 1)
    return most


def test_rate_is_a_cap_after_a_stall(tmp_path, ipc_dir):
    # 1.5 MiB batches, one queued at each end: a stalled receiver blocks
    # serve-ten after a few batches, and what ZeroMQ and the kernel held
    # comes at once after the stall (counted in `queued` below).
    rate, stall_s, burst = 20, 3.0, 2
    path = synth(tmp_path / "rate.ten", 8, 256)
    url = f"ipc://{ipc_dir}/rate"
    proc = start_serve_ten(["-i", str(path), "--epochs", "0", "--rate", str(rate), "--hwm", "1",
                            "--queue-bytes", "0", "zpush+" + url])
    try:
        with tensorcom.Connection("zpull+" + url, timeout=TIMEOUT_S, recv_hwm=1) as pull:
            for _ in range(5):
                pull.recv()
            time.sleep(stall_s)
            times = []
            end = time.monotonic() + 3.0
            while time.monotonic() < end:
                pull.recv()
                times.append(time.monotonic())
    finally:
        stop(proc)
    # Held in queues while stalled: the receiver's and the sender's
    # high-water marks, the batch in flight and the socket buffers.
    queued = 5
    most = most_in_any_window(times, 1.0)
    assert most <= rate + burst + queued, (most, np.diff(times[:30]).round(3).tolist())
    # Still served at about the rate: 3 s after the stall.
    assert len(times) >= 2.5 * rate, len(times)
