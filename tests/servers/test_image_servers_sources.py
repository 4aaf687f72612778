"""Sources: pipe: shards (exits, failures, retries), gzipped pax shards, names with control characters, a bound TCP port, serve-imagenet-dir.

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
from image_server_data import run, check_batches  # noqa: E402


def test_pipe_cat_serves_the_same_samples_as_the_file(clean_data, rundir):
    paths, _ = clean_data
    common = ["--epochs", "1", "--meta", "-b", "8", "-w", "1", "--shuffle", "0", "--size", "32", "--seed", "4",
              "-r", "0"]
    a = run(["-u", paths[0]] + common, rundir)
    for name in ("pipe:cat " + paths[0], "file:" + paths[0]):
        b = run(["-u", name] + common, rundir)
        assert a.rc == 0 and b.rc == 0, (a, b)
        assert a.keys() == b.keys() and len(a.keys()) == 20
        for x, y in zip(a.batches, b.batches):
            assert x[0].tobytes() == y[0].tobytes() and x[1].tobytes() == y[1].tobytes()
        assert b.summary()[3] == 0


def test_meta_names_a_pipe_shard_without_its_command(clean_data, rundir):
    paths, _ = clean_data
    secret = "user:s3cret@"
    command = f"pipe:cat {paths[0]} # https://{secret}example.invalid/train-000007.tar?token=abc"
    r = run(["-u", command, "--epochs", "1", "--meta", "-b", "8", "-w", "1", "--size", "32", "-r", "0"], rundir)
    assert r.rc == 0, r
    shards = {shard for meta in r.metas for shard in meta["shards"]}
    assert shards == {"train-000007.tar"}


def test_pipe_exiting_with_status_3_after_a_whole_archive(clean_data, rundir):
    paths, labels = clean_data
    r = run(["-u", f"pipe:cat {paths[0]}; exit 3", "-u", paths[1], "--epochs", "1", "--meta", "-b", "8",
             "--size", "32", "-r", "0"], rundir)
    assert r.rc == 0, r
    assert "exited with status 3" in r.err, r.err
    counts = collections.Counter(r.keys())
    assert all(c == 1 for c in counts.values()), counts
    assert set(counts) <= set(labels)
    assert {k for k in labels if k.startswith("c1_")} <= set(counts)


def test_pipe_failing_midway_is_retried_without_duplicates(clean_data, rundir):
    paths, labels = clean_data
    # Half of the archive, then failure: tried 3 times, samples already
    # served are not served again.
    cut = h.member_offsets(paths[0])["c0_010.jpg"]
    counter = os.path.join(rundir, "attempts")
    command = f"pipe:echo x >> {counter}; head -c {cut[0] + cut[1] // 2} {paths[0]}; exit 3"
    r = run(["-u", command, "-u", paths[1], "--epochs", "1", "--meta", "-b", "8", "--size", "32", "-r", "0"],
            rundir)
    assert r.rc == 0, r
    assert "exited with status 3" in r.err, r.err
    with open(counter) as f:
        # "retried 3 times": three tries in all (or one and three retries).
        assert len(f.read().split()) in (3, 4)
    counts = collections.Counter(r.keys())
    assert all(c == 1 for c in counts.values()), counts
    expected = {f"c0_{i:03d}" for i in range(10)} | {k for k in labels if k.startswith("c1_")}
    assert set(counts) == expected
    assert r.summary()[3] == 1


def test_pipe_that_never_works_is_skipped(clean_data, rundir):
    paths, labels = clean_data
    r = run(["-u", "pipe:exit 3", "-u", paths[1], "--epochs", "1", "--meta", "-b", "8", "--size", "32",
             "-r", "0"], rundir)
    assert r.rc == 0, r
    assert "exited with status 3" in r.err, r.err
    assert collections.Counter(r.keys()) == collections.Counter(k for k in labels if k.startswith("c1_"))
    assert r.summary()[3] == 1


def test_dir_server_labels_classes_in_sorted_order(folder, rundir):
    d, files = folder
    r = run(["-d", d, "--epochs", "1", "--meta", "-b", "5", "--size", "32", "-r", "0"], rundir, exe=h.DIR_EXE)
    assert r.rc == 0, r
    assert r.out.startswith("serve-imagenet-dir: 12 images,"), r
    check_batches(r, 32, 5)
    got = collections.Counter()
    for key, label, _ in r.samples():
        path = os.path.normpath(key)
        got[path] += 1
        assert files["train"][path] == label, key
    assert set(got) == set(files["train"]) and all(c == 1 for c in got.values()), got
    assert r.summary()[:3] == (12, 3, {})


def test_dir_server_val_uses_val_split(folder, rundir):
    d, files = folder
    r = run(["-d", d, "--epochs", "1", "--meta", "-b", "4", "--size", "32", "--val", "-r", "0"], rundir,
            exe=h.DIR_EXE)
    assert r.rc == 0, r
    got = {os.path.normpath(k): label for k, label, _ in r.samples()}
    assert got == files["val"]


def test_dir_server_without_train_uses_classes_directly(folder, rundir):
    d, files = folder
    r = run(["-d", os.path.join(d, "train"), "--epochs", "1", "--meta", "-b", "4", "--size", "32", "-r", "0"],
            rundir, exe=h.DIR_EXE)
    assert r.rc == 0, r
    got = {os.path.normpath(k): label for k, label, _ in r.samples()}
    assert got == files["train"]


def test_gzipped_pax_shard_with_long_and_dotted_keys(root, rundir):
    rng = np.random.default_rng(21)
    d = tempfile.mkdtemp(dir=root, prefix="gz")
    keys = ["x" * 120 + "/long0", "x" * 120 + "/long1", "dir.v1/sub.d/k2", "dir.v1/sub.d/k3", "k4", "k5"]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i, key in enumerate(keys):
            for ext, data in (("jpg", h.encode(h.smooth_image(rng, 64, 64), "jpg")), ("cls", h.cls(i))):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    path = os.path.join(d, "shard.tar.gz")
    with open(path, "wb") as f:
        f.write(gzip.compress(buf.getvalue()))
    r = run(["-u", path, "--epochs", "1", "--meta", "-b", "4", "--size", "32", "-r", "0"], rundir)
    assert r.rc == 0, r
    got = {k: label for k, label, _ in r.samples()}
    assert got == {k: i for i, k in enumerate(keys)}


def test_control_characters_in_member_names_are_escaped_in_messages(root, rundir):
    rng = np.random.default_rng(22)
    d = tempfile.mkdtemp(dir=root, prefix="ctl")
    path = os.path.join(d, "shard.tar")
    members = [("ok", "jpg", h.encode(h.smooth_image(rng, 64, 64), "jpg")), ("ok", "cls", h.cls(0)),
               ("evil\x1b[2J\rX", "jpg", b"not an image"), ("evil\x1b[2J\rX", "cls", h.cls(1))]
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for key, ext, data in members:
            info = tarfile.TarInfo(f"{key}.{ext}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    r = run(["-u", path, "--epochs", "1", "-b", "1", "--size", "32", "-r", "0"], rundir)
    assert r.rc == 0, r
    assert "evil\\x1b[2J\\rX" in r.err, r.err
    assert "\x1b" not in r.err and "\r" not in r.err


def test_bound_tcp_port_is_reported_and_served(clean_data, root):
    paths, labels = clean_data
    proc = subprocess.Popen([h.SHARDS_EXE, "-u", paths[0], "--epochs", "1", "--meta", "-b", "8", "--size", "32",
                             "-r", "0", "zrpush+tcp://127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "no first line within 10 s"
        first = proc.stdout.readline().decode()
        m = re.search(r"on zrpush\+tcp://127\.0\.0\.1:0 \[bound (tcp://127\.0\.0\.1:(\d+))\]$", first.strip())
        assert m and int(m.group(2)) > 0, first
        pull.connect(m.group(1))
        keys = []
        receipts = h.Receipts(ctx)
        while pull.poll(5000):
            frames = pull.recv_multipart(copy=False)
            arrays, infos = h.tb.decode_message([f.bytes for f in frames], with_infos=True)
            meta = h.msgpack.unpackb(arrays[2].tobytes())
            # Confirmed over tcp, to the host the batch came from: the server then ends.
            assert receipts.take(meta, frames[0].get("Peer-Address"))
            keys += meta["keys"]
            if len(keys) == 20:
                break
        receipts.close()
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, (out, err)
        assert sorted(keys) == sorted(k for k in labels if k.startswith("c0_"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        pull.close(linger=0)
        ctx.term()
