"""Lifecycle: stop signals, receivers that leave, PUB subscribers that never read, and memory bounds over epochs and within a shard.

Run: TENSORCOM_BUILD_DIR=build pytest-3 -q -p no:cacheprovider tests/servers/
"""
import collections
import gzip
import io
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager

import cv2
import numpy as np
import pytest
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_helpers as h  # noqa: E402
from image_server_data import run, forever_server, receive, _rss_bytes, _sanitized, pub_server, subscriber, write_zero_members_tgz, good_samples, peak_memory_mib  # noqa: E402


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_signal_stops_a_forever_server_with_a_summary(clean_data, rundir, signame):
    paths, _ = clean_data
    with forever_server(["-u", paths[0], "-b", "4", "--size", "16", "-r", "0"], rundir) as (proc, pull):
        receive(pull, 12)  # more than one epoch: it goes on
        proc.send_signal(getattr(signal, signame))
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, (out, err)
        assert b": done: served " in out, out


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_signal_stops_a_server_reading_a_stalled_pipe_and_ends_the_command(clean_data, rundir, signame):
    paths, _ = clean_data
    marker = os.path.join(rundir, "started")
    # One whole shard, then a command that stalls forever without closing its output.
    # A sleep no other process runs: tests in other trees may be running this one.
    nap = f"{300 + os.getpid() % 1000 / 1000:.3f}"
    command = f"pipe:cat {paths[0]}; touch {marker}; exec sleep {nap}"
    with forever_server(["-u", command, "-b", "4", "--size", "16", "-r", "0", "--shuffle", "0"],
                        rundir) as (proc, pull):
        # No batch need come out: the server holds back the last samples it
        # read until more follow (their replacements, should they fail).
        deadline = time.monotonic() + 10
        while not os.path.exists(marker):
            assert time.monotonic() < deadline, "the command never stalled"
            time.sleep(0.05)
        start = time.monotonic()
        proc.send_signal(getattr(signal, signame))
        out, err = proc.communicate(timeout=20)
        assert time.monotonic() - start < 3, (out, err)
        assert proc.returncode == 0, (out, err)
        assert b": done: served " in out, out
        assert err.count(f"sleep {nap}".encode()) == 0, err  # not started again
    # The stalled command is gone too.
    time.sleep(0.2)
    still = subprocess.run(["pgrep", "-f", f"touch {marker}; exec sleep {nap}"], capture_output=True, text=True)
    leftover = subprocess.run(["pgrep", "-fx", f"sleep {nap}"], capture_output=True, text=True)
    assert still.stdout.strip() == "" and leftover.stdout.strip() == "", (still.stdout, leftover.stdout)


def test_a_server_whose_receivers_are_gone_stops_at_once(clean_data, rundir):
    """A PUSH server whose only receiver went away has batches it cannot
    deliver: a stop signal ends it at once, not after --linger (10 s by
    default), which is for batches a connected receiver is still taking."""
    paths, _ = clean_data
    with forever_server(["-u", paths[0], "-b", "4", "--size", "16", "-r", "0", "-w", "2"], rundir) as (proc, pull):
        receive(pull, 2)
        pull.close(linger=0)
        time.sleep(0.5)  # the server sees the receiver go, fills its queues, waits
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, (out, err)
        assert b": done: served " in out, out
        assert time.monotonic() - start < 5, "waited out the linger for a receiver that is gone"


def test_a_stop_signal_as_the_only_receiver_leaves_always_stops(clean_data, rundir):
    """A server that binds PUSH, its only receiver connected to it: SIGTERM
    at the moment that receiver disconnects. With no peer a PUSH send blocks
    until one comes, and a signal that came just before the send was never
    seen. Five tries, each a stop within 5 s with the summary."""
    paths, _ = clean_data
    for attempt in range(5):
        sock = os.path.join(rundir, f"bound{attempt}")
        proc = subprocess.Popen([h.SHARDS_EXE, "-u", paths[0], "-b", "4", "--size", "16", "-r", "0", "-w", "2",
                                 "zrpush+ipc://" + sock], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        ctx = zmq.Context()
        pull = ctx.socket(zmq.PULL)
        pull.setsockopt(zmq.LINGER, 0)
        pull.setsockopt(zmq.RCVHWM, 1)
        try:
            pull.connect("ipc://" + sock)
            receive(pull, 3)
            pull.close(linger=0)
            start = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
            assert time.monotonic() - start < 5, (attempt, out, err)
            assert proc.returncode == 0 and b": done: served " in out, (attempt, out, err)
        finally:
            h.close_server(proc, pull, ctx)


def test_memory_stays_flat_over_hundreds_of_epochs(clean_data, rundir):
    """Bounded queues: a consumer slower than the server, 240 epochs; a leak
    of even 1 KiB a sample, or a queue that grows, would show in the RSS."""
    if _sanitized(h.SHARDS_EXE):
        pytest.skip("sanitizer build: its allocator keeps freed memory on purpose")
    paths, labels = clean_data
    batch = 16
    args = ["-u", "{" + ",".join(paths) + "}", "-b", str(batch), "-w", "2", "--size", "64", "--shuffle", "16",
            "-r", "0"]
    with forever_server(args, rundir, output=subprocess.DEVNULL) as (proc, pull):
        # The wait allows for a machine running other suites beside this one:
        # 40 runs of this server (24,000 batches) beside a full CI run had no
        # stall, but gaps of up to 3.7 s between batches. Not a latency bound.
        receive(pull, 100, timeout_s=30)  # 40 epochs: every buffer and queue at its working size
        warm = _rss_bytes(proc.pid)
        samples = []
        for _ in range(5):
            receive(pull, 100, timeout_s=30, pause_s=0.001)
            samples.append(_rss_bytes(proc.pid))
    assert 600 * batch >= 200 * len(labels)
    growth = max(samples) - warm
    assert growth < 4 << 20, f"RSS {warm >> 20} MiB after warm-up, then {[s >> 20 for s in samples]} MiB"


def test_subscribers_that_never_read_do_not_stall_the_others(clean_data):
    """A PUB server keeps serving a healthy subscriber at full rate while two
    others, connected at different times, never read: the batches queued for
    them must not take the buffers the pipeline fills."""
    paths, _ = clean_data
    args = ["-u", "{" + ",".join(paths) + "}", "-b", "16", "--size", "128", "-r", "0", "--shuffle", "0"]
    ctx = zmq.Context()
    socks = []
    try:
        with pub_server(args) as (proc, address):
            healthy = subscriber(ctx, address)
            socks.append(healthy)
            receive(healthy, 10, timeout_s=10)
            for _ in range(2):
                socks.append(subscriber(ctx, address, stuck=True))
                receive(healthy, 40, timeout_s=10)  # fails when the server stalls for everyone
            start = time.monotonic()
            receive(healthy, 100, timeout_s=10)
            assert proc.poll() is None
            assert time.monotonic() - start < 60
    finally:
        for s in socks:
            s.close(linger=0)
        ctx.term()


def test_a_subscriber_that_never_reads_does_not_hold_a_stop(clean_data):
    """A PUB server's queue to a stalled subscriber stays full: a stop signal
    must not wait out --linger (10 s) for it, since PUB drops for slow
    subscribers anyway. Stop within 3 s, with the summary."""
    paths, _ = clean_data
    args = ["-u", "{" + ",".join(paths) + "}", "-b", "16", "--size", "128", "-r", "0", "--shuffle", "0"]
    ctx = zmq.Context()
    socks = []
    try:
        with pub_server(args) as (proc, address):
            healthy = subscriber(ctx, address)
            socks.append(healthy)
            socks.append(subscriber(ctx, address, stuck=True))
            receive(healthy, 40, timeout_s=10)  # the stuck one's queues are full by now
            start = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
            took = time.monotonic() - start
            assert proc.returncode == 0 and b": done: served " in out, (out, err)
            assert took < 3, f"stopped after {took:.1f} s"
    finally:
        for s in socks:
            s.close(linger=0)
        ctx.term()


JPEG_HEAD = b"\xff\xd8\xff\xe0"  # a JPEG's first bytes: the member is read whole


def zero_member_run(root, rundir, seed, count, size, args, head=b""):
    """Serves a .tar.gz of `count` zero-filled members of `size` bytes, each
    starting with `head`, then four good samples g0-g3; and the good samples
    alone. Returns the first run and how many MiB more its peak memory was."""
    if _sanitized(h.SHARDS_EXE):
        pytest.skip("sanitizer build: its allocator keeps freed memory on purpose")
    d = tempfile.mkdtemp(dir=root, prefix="zm")
    good = good_samples(np.random.default_rng(seed), 4, "g")
    path = write_zero_members_tgz(os.path.join(d, "zeros.tar.gz"), count, size, good, head=head)
    assert os.path.getsize(path) < 8 << 20
    baseline = write_zero_members_tgz(os.path.join(d, "none.tar.gz"), 0, 0, good)
    r = run(["-u", path] + args, rundir)
    plain = run(["-u", baseline] + args, tempfile.mkdtemp(dir=root, prefix="zp"))
    assert r.rc == 0 and plain.rc == 0, (r, plain)
    return r, peak_memory_mib(r) - peak_memory_mib(plain)


def test_memory_limit_bounds_buffered_samples_in_bytes(root, rundir):
    """Sixty-four 900 KiB members (58 MB that pack into a few hundred KB)
    must not all sit in the shuffle buffer: --memory-limit 32 MiB bounds
    what the server holds in bytes."""
    args = ["--epochs", "1", "--meta", "-b", "1", "--size", "32", "-r", "0", "--memory-limit", str(32 << 20)]
    r, grown = zero_member_run(root, rundir, 21, 64, 900 << 10, args, head=JPEG_HEAD)
    assert r.summary()[2] == {"missing label": 64}, r.summary()
    r.assert_replaced([f"g{i}" for i in range(4)], every=False)
    assert grown < 32, r.out


def test_running_out_of_memory_in_one_shard_ends_only_that_shard(root, rundir):
    """An allocation failure while reading a shard (a 300 MB member under a
    tight address-space limit) abandons that shard with a message; the
    other shard is served and the server exits normally."""
    if _sanitized(h.SHARDS_EXE):
        pytest.skip("sanitizer build: its shadow memory needs the address space")
    import resource
    rng = np.random.default_rng(22)
    d = tempfile.mkdtemp(dir=root, prefix="oom")
    huge = write_zero_members_tgz(os.path.join(d, "a-huge.tar.gz"), 1, 300 << 20, head=b"\xff\xd8\xff\xe0")
    good = h.write_tar(os.path.join(d, "b-good.tar"), good_samples(rng, 4, "g"))
    limit = 900 << 20

    def cap_address_space():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    args = ["-u", "{" + huge + "," + good + "}", "--epochs", "1", "--meta", "-b", "1", "--size", "32", "-r", "0",
            "--shuffle", "0", "-w", "1", "--max-image-bytes", str(512 << 20),
            "--memory-limit", str(16 << 30)]  # a limit that leaves an image 512 MiB; the address space is less
    r = run(args, rundir, preexec_fn=cap_address_space)
    assert r.rc == 0, r
    assert sorted(r.keys()) == [f"g{i}" for i in range(4)]
    assert r.summary()[3] == 1
    assert re.search(r"a-huge\.tar\.gz abandoned: out of memory while reading it", r.err), r.err


def test_a_one_epoch_pub_server_reaches_a_slower_subscriber_whole(clean_data):
    """A short run of a PUB server and a subscriber slower than it (it
    queues 2 batches and takes 50 ms a batch): the subscriber still gets the
    whole epoch, as from the reference's servers: the server queues as
    ZeroMQ's count does, within --queue-bytes."""
    paths, _ = clean_data
    args = ["-u", "{" + ",".join(paths) + "}", "-b", "4", "--size", "64", "-r", "0", "--epochs", "1"]
    ctx = zmq.Context()
    try:
        with pub_server(args) as (proc, address):
            sub = ctx.socket(zmq.SUB)
            sub.setsockopt(zmq.LINGER, 0)
            sub.setsockopt(zmq.RCVHWM, 2)
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            sub.connect(address)
            batches = 0
            while sub.poll(3000):
                frames = sub.recv_multipart()
                assert len(frames) >= 4
                batches += 1
                time.sleep(0.05)
            sub.close(linger=0)
            assert proc.wait(timeout=30) == 0, proc.stderr.read().decode()
            assert batches == 10, f"{batches} of 10 batches reached the subscriber"
    finally:
        ctx.term()


def test_the_memory_limit_bounds_images_that_look_like_jpegs(root, rundir):
    """Four 64 MiB members that start as JPEGs do (a gzip bomb of a few
    hundred KB) under --memory-limit 128 MiB: an image over what the limit
    leaves it is passed over unread, named, and the server stays within the
    limit; whole, they would be held by several stages at once."""
    args = ["--epochs", "1", "--meta", "-b", "1", "--size", "32", "-r", "0", "--memory-limit", str(128 << 20)]
    r, grown = zero_member_run(root, rundir, 29, 4, 64 << 20, args, head=JPEG_HEAD)
    assert r.summary()[2] == {"too large": 4}, r.summary()
    assert "the limit is 4194304 (what --memory-limit leaves an image)" in r.err, r.err
    r.assert_replaced([f"g{i}" for i in range(4)])
    assert grown < 16, r.out


def test_a_member_that_is_no_image_is_not_buffered(root, rundir):
    """Sixteen 100 MiB zero-filled ".jpg" members (a shard of a few MB): each
    is read no further than its first bytes, which show it is no image, and
    skipped as undecodable; peak memory stays far below one member."""
    # A limit that leaves an image more than a member's 100 MiB.
    args = ["--epochs", "1", "--meta", "-b", "1", "--size", "32", "-r", "0", "--memory-limit", str(4 << 30)]
    r, grown = zero_member_run(root, rundir, 23, 16, 100 << 20, args)
    assert r.summary()[2] == {"missing label": 16}, r.summary()
    r.assert_replaced([f"g{i}" for i in range(4)])
    assert grown < 32, r.out