"""Data and helpers of the image servers' integration tests (test_*.py here):
shards written with tarfile and cv2.imencode, servers run with
server_helpers.run_server (batches received on a PULL socket bound by the
test, with a timeout on every receive, the server killed in a finally).
"""
import collections
import gzip
import io
import os
import re
import resource
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

CLASSES = 10


def run(args, rundir, **kw):
    return h.run_server(args, tempfile.mkdtemp(dir=rundir, prefix="x"), **kw)


class Dataset:
    def __init__(self):
        self.paths = []           # shard paths, in name order
        self.good = {}            # key -> (label, shard path)
        self.bad = {}             # key -> skip reason(s) it may be counted under
        self.bad_shard = {}       # key -> shard path, of the bad samples
        self.grey = set()         # keys of grey images (R == G == B when served)
        self.pattern = ""         # brace pattern naming all shards


def _random_good(rng, kind):
    h_, w_ = (int(v) for v in rng.integers(64, 161, 2))
    if kind == "jpg":
        return "jpg", h.encode(h.smooth_image(rng, h_, w_), "jpg")
    if kind == "png":
        return "png", h.encode(h.smooth_image(rng, h_, w_), "png")
    if kind == "grey-jpg":
        return "jpg", h.encode(h.smooth_image(rng, h_, w_, channels=1), "jpg")
    if kind == "progressive-jpg":
        return "jpg", h.encode(h.smooth_image(rng, h_, w_), "jpg", progressive=True)
    if kind == "jpeg-ext":
        return "jpeg", h.encode(h.smooth_image(rng, h_, w_), "jpg")
    if kind == "png16":
        img = h.smooth_image(rng, h_, w_).astype(np.uint16) * 257
        return "png", h.encode(img, "png")
    if kind == "grey-png16":
        img = h.smooth_image(rng, h_, w_, channels=1).astype(np.uint16) * 257
        return "png", h.encode(img, "png")
    if kind == "grey-png":
        return "png", h.encode(h.smooth_image(rng, h_, w_, channels=1), "png")
    if kind == "rgba-png":
        img = h.smooth_image(rng, h_, w_)
        alpha = np.full(img.shape[:2] + (1,), 200, np.uint8)
        return "png", h.encode(np.concatenate([img, alpha], axis=2), "png")
    raise ValueError(kind)


SPECIAL_GOOD = {
    0: {3: "grey-jpg", 7: "progressive-jpg", 11: "jpeg-ext"},
    1: {2: "png16", 9: "rgba-png", 13: "grey-png"},
    2: {4: "grey-png16", 8: "progressive-jpg"},
}


def _bad_samples(rng, shard):
    """(key, members, reasons) of the bad samples of shard 0, 1 or 2."""
    good_jpg = h.encode(h.smooth_image(rng, 96, 96), "jpg")
    if shard == 0:
        corrupt = b"\xff\xd8\xff\xe0" + rng.integers(0, 256, 3000, dtype=np.uint8).tobytes()
        return [
            ("shard0/bad_corrupt", {"jpg": corrupt, "cls": h.cls(1)}, {"undecodable"}),
            ("shard0/bad_nocls", {"jpg": good_jpg}, {"missing label"}),
        ]
    if shard == 1:
        whole = h.encode(h.smooth_image(rng, 128, 128), "jpg")
        return [
            ("shard1/bad_trunc", {"jpg": whole[:len(whole) // 2], "cls": h.cls(2)}, {"truncated"}),
            ("shard1/bad_abc", {"jpg": good_jpg, "cls": b"abc"}, {"bad label"}),
            ("shard1/bad_empty", {"jpg": b"", "cls": h.cls(3)}, {"empty"}),
        ]
    return [
        # Neither label nor image: either reason is fair.
        ("shard2/bad_jsononly", {"json": b'{"a": 1}'}, {"missing label", "no image"}),
        ("shard2/bad_range", {"jpg": good_jpg, "cls": h.cls(CLASSES + 2)}, {"label out of range"}),
        ("shard2/bad_noimage", {"cls": h.cls(4), "json": b"{}"}, {"no image"}),
        ("shard2/bad_notpng", {"png": b"this is not a png at all" * 10, "cls": h.cls(5)}, {"undecodable"}),
    ]


def make_main_dataset(root):
    rng = np.random.default_rng(20240601)
    ds = Dataset()
    d = os.path.join(root, "main")
    os.makedirs(d)
    for s in range(3):
        path = os.path.join(d, f"shard-{s:03d}.tar")
        samples = []
        goods = []
        for i in range(36):
            kind = SPECIAL_GOOD[s].get(i, "png" if i % 5 == 4 else "jpg")
            ext, data = _random_good(rng, kind)
            key = f"shard{s}/img{i:04d}"
            label = int(rng.integers(0, CLASSES))
            members = {ext: data, "cls": h.cls(label)} if i % 3 else {"cls": h.cls(label), ext: data}
            if i % 6 == 1:
                members["json"] = b'{"extra": true}'
            if i % 7 == 2:  # whitespace around the label is fine
                members["cls"] = f" {label}\n".encode()
            goods.append((key, members))
            ds.good[key] = (label, path)
            if kind.startswith("grey"):
                ds.grey.add(key)
        bads = _bad_samples(rng, s)
        for key, _, reasons in bads:
            ds.bad[key] = reasons
            ds.bad_shard[key] = path
        # Bad samples spread through the good ones.
        for j, (key, members, _) in enumerate(bads):
            goods.insert(5 + 9 * j, (key, members))
        samples = goods
        h.write_tar(path, samples)
        ds.paths.append(path)
    # A truncated tar: cut in the middle of the image of its 11th sample.
    path = os.path.join(d, "shard-003.tar")
    samples = []
    for i in range(14):
        ext, data = _random_good(rng, "jpg")
        samples.append((f"shard3/img{i:04d}", {ext: data, "cls": h.cls(i % CLASSES)}))
    whole = path + ".whole"
    h.write_tar(whole, samples)
    offset, size = h.member_offsets(whole)["shard3/img0010.jpg"]
    with open(whole, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:offset + size // 2])
    os.unlink(whole)
    for i in range(10):
        ds.good[f"shard3/img{i:04d}"] = (i % CLASSES, path)
    ds.paths.append(path)
    ds.pattern = os.path.join(d, "shard-{000..003}.tar")
    return ds


def expected_skips(ds, multiplier=1):
    """{reason: count} for the bad samples with one possible reason, and the
    keys that may go to either of several reasons."""
    fixed = collections.Counter()
    loose = []
    for key, reasons in ds.bad.items():
        if len(reasons) == 1:
            fixed[next(iter(reasons))] += multiplier
        else:
            loose.append(reasons)
    return fixed, loose


def check_skips(skipped, ds, multiplier=1):
    fixed, loose = expected_skips(ds, multiplier)
    rest = collections.Counter(skipped)
    rest.subtract(fixed)
    for reasons in loose:
        for _ in range(multiplier):
            hit = [r for r in reasons if rest[r] > 0]
            assert hit, f"skipped {skipped}: nothing left for one of {reasons}"
            rest[hit[0]] -= 1
    assert all(v == 0 for v in rest.values()), f"skipped {skipped}, expected {dict(fixed)} + one of each {loose}"


def check_batches(r, size, batch, dtype=np.uint8):
    for images, labels in zip(r.images, r.labels):
        n = images.shape[0]
        assert 1 <= n <= batch
        assert images.shape == (n, size, size, 3) and images.dtype == dtype
        assert labels.shape == (n,) and labels.dtype == np.int32


def by_key(r):
    out = {}
    for key, label, image in r.samples():
        assert key not in out, f"{key} served twice"
        out[key] = (label, image)
    return out


def shard_args(paths):
    args = []
    for p in paths:
        args += ["-u", p]
    return args


COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 255, 255), (0, 0, 0), (200, 100, 50)]


def _left_right(image):
    s = image.shape[1]
    return image[:, : s // 2 - 2].mean(), image[:, s // 2 + 2:].mean()


@contextmanager
def forever_server(args, rundir, output=subprocess.PIPE):
    """serve-imagenet-shards ARGS pushing to a PULL socket bound here, which
    the test reads as it likes: (process, socket); killed if still running."""
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    proc = None
    try:
        sock = os.path.join(rundir, "s")
        pull.bind("ipc://" + sock)
        proc = subprocess.Popen([h.SHARDS_EXE, *args, "zpush+ipc://" + sock],
                                stdout=output, stderr=output, stdin=subprocess.DEVNULL)
        yield proc, pull
    finally:
        h.close_server(proc, pull, ctx)


def receive(pull, count, timeout_s=5, pause_s=0.0):
    for _ in range(count):
        assert pull.poll(timeout_s * 1000), f"no batch within {timeout_s} s"
        pull.recv_multipart()
        if pause_s:
            time.sleep(pause_s)


def _rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _sanitized(exe):
    # ASan keeps freed memory in quarantine: RSS grows by design there.
    with open(exe, "rb") as f:
        return b"__asan_init" in f.read()


@contextmanager
def pub_server(args, open_files=None):
    """serve-imagenet-shards ARGS publishing on zpub tcp://127.0.0.1:0 (its
    descriptor limit set to open_files if given): (process, the bound tcp
    address); killed if still running."""
    def limit():
        if open_files:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
    proc = subprocess.Popen([h.SHARDS_EXE, *args, "zpub://127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, preexec_fn=limit)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "no first line within 10 s"
        first = proc.stdout.readline().decode()
        m = re.search(r"\[bound (tcp://127\.0\.0\.1:\d+)\]", first)
        assert m, first
        yield proc, m.group(1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def subscriber(ctx, address, stuck=False):
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    if stuck:  # reads nothing: its queues fill and stay full
        sub.setsockopt(zmq.RCVHWM, 1)
        sub.setsockopt(zmq.RCVBUF, 64 << 10)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(address)
    return sub


class _Zeros(io.RawIOBase):
    """n zero bytes, read without holding them."""
    def __init__(self, n):
        self.left = n

    def readable(self):
        return True

    def readinto(self, b):
        k = min(len(b), self.left)
        b[:k] = bytes(k)
        self.left -= k
        return k


class _Chained(io.RawIOBase):
    """prefix, then what stream reads."""
    def __init__(self, prefix, stream):
        self.prefix = prefix
        self.stream = stream

    def readable(self):
        return True

    def readinto(self, b):
        if self.prefix:
            k = min(len(b), len(self.prefix))
            b[:k] = self.prefix[:k]
            self.prefix = self.prefix[k:]
            return k
        return self.stream.readinto(b)


def write_zero_members_tgz(path, count, size, good=(), head=b""):
    """A .tar.gz of `count` zero-filled "jpg" members of `size` bytes (a few
    hundred KB on disk), each starting with `head` (b"\\xff\\xd8\\xff\\xe0":
    a JPEG's first bytes, so that it is read whole), then the (key, members)
    samples of `good`."""
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for i in range(count):
            info = tarfile.TarInfo(f"zero{i:02d}.jpg")
            info.size = size
            zeros = io.BufferedReader(_Zeros(size - len(head)), 1 << 20)
            tar.addfile(info, io.BufferedReader(_Chained(head, zeros), 1 << 20))
        for key, members in good:
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def good_samples(rng, count, prefix):
    return [(f"{prefix}{i}", {"jpg": h.encode(h.smooth_image(rng, 64, 64), "jpg"), "cls": h.cls(1)})
            for i in range(count)]


def peak_memory_mib(r):
    m = re.search(r"; peak memory: (\d+) MiB", r.out)
    assert m, r.out
    return int(m.group(1))
