"""Epochs: every good sample served exactly once an epoch, ranks splitting the shards, the last batch alone short, shards drawn with replacement.

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
from image_server_data import CLASSES, run, check_skips, check_batches, shard_args  # noqa: E402


def test_one_epoch_serves_every_good_sample_exactly_once(main_data, rundir):
    ds = main_data
    r = run(["-u", ds.pattern, "--epochs", "1", "--meta", "-b", "8", "-w", "2", "--size", "32",
             "--classes", str(CLASSES), "--seed", "1", "-r", "0"], rundir)
    assert r.rc == 0, r
    first = r.out.splitlines()[0]
    assert first.startswith("serve-imagenet-shards: 4 shards, 2 workers, batches of 8 on zpush+ipc://"), r
    check_batches(r, 32, 8)
    served, nbatches, skipped, shard_errors = r.summary()
    assert nbatches == len(r.batches), r
    samples = r.samples()
    assert served == len(samples)
    counts = collections.Counter(k for k, _, _ in samples)
    assert set(counts) == set(ds.good), (
        f"missing {sorted(set(ds.good) - set(counts))}, unexpected {sorted(set(counts) - set(ds.good))}")
    # Every sample read is served once; each skipped one is replaced by a
    # good neighbour (served twice), so the epoch keeps its length.
    r.assert_replaced(ds.good)
    assert served == len(ds.good) + sum(skipped.values())
    for key, label, _ in samples:
        assert label == ds.good[key][0], key
    # The metadata names each sample's shard.
    for meta in r.metas:
        assert len(meta["keys"]) == len(meta["shards"])
        for key, shard in zip(meta["keys"], meta["shards"]):
            assert shard == ds.good[key][1], key
        assert isinstance(meta["server"], str) and meta["server"]
    assert [m["seq"] for m in r.metas] == list(range(len(r.batches)))
    check_skips(skipped, ds)
    assert shard_errors == 1, r
    assert "shard-003.tar" in r.err and "ended early" in r.err, r.err
    # Warnings (rate-limited: at least one) name the key, its shard and the reason.
    warnings = re.findall(r"skipped sample '([^']*)' of (\S+): ([a-z ]+)", r.err)
    assert warnings, r.err
    for key, shard, reason in warnings:
        assert key in ds.bad and shard == ds.bad_shard[key] and reason.strip() in ds.bad[key], (key, shard, reason)
    # Grey images stay grey.
    for key, _, image in samples:
        if key in ds.grey:
            assert np.array_equal(image[..., 0], image[..., 1]) and np.array_equal(image[..., 1], image[..., 2]), key


def test_two_epochs_serve_every_good_sample_twice(main_data, rundir):
    ds = main_data
    r = run(["-u", ds.pattern, "--epochs", "2", "--meta", "-b", "8", "-w", "2", "--size", "32",
             "--classes", str(CLASSES), "--seed", "2", "-r", "0"], rundir)
    assert r.rc == 0, r
    check_batches(r, 32, 8)
    keys = r.keys()
    counts = collections.Counter(keys)
    assert set(counts) == set(ds.good)
    assert all(c >= 2 for c in counts.values()), {k: c for k, c in counts.items() if c < 2}
    served, nbatches, skipped, shard_errors = r.summary()
    assert len(keys) == served == 2 * len(ds.good) + sum(skipped.values()) and nbatches == len(r.batches)
    assert r.replaced() == skipped
    check_skips(skipped, ds, multiplier=2)
    assert shard_errors == 2


def test_ranks_split_the_shards(main_data, rundir):
    ds = main_data
    parts = []
    for rank in ("0", "1"):
        r = run(["-u", ds.pattern, "--epochs", "1", "--meta", "-b", "8", "--size", "32",
                 "--classes", str(CLASSES), "--seed", "11", "--rank", rank, "--world", "2", "-r", "0"], rundir)
        assert r.rc == 0, r
        counts = collections.Counter(r.keys())
        assert r.replaced() == r.summary()[2]
        parts.append(set(counts))
        # Whole shards go to one rank.
        for meta in r.metas:
            for key, shard in zip(meta["keys"], meta["shards"]):
                assert ds.good[key][1] == shard
    assert parts[0] and parts[1]
    assert not parts[0] & parts[1]
    assert parts[0] | parts[1] == set(ds.good)
    shards0 = {ds.good[k][1] for k in parts[0]}
    shards1 = {ds.good[k][1] for k in parts[1]}
    assert not shards0 & shards1


def test_only_the_epochs_last_batch_is_short(root, rundir):
    rng = np.random.default_rng(9)
    d = tempfile.mkdtemp(dir=root, prefix="sb")
    samples = [(f"g{i}", {"jpg": h.encode(h.smooth_image(rng, 64, 64), "jpg"), "cls": h.cls(1)}) for i in range(3)]
    big = h.encode(h.smooth_image(rng, 1600, 1600), "jpg", progressive=True)
    samples.append(("slowbad", {"jpg": big[: len(big) * 9 // 10], "cls": h.cls(1)}))  # slow to fail
    samples.append(("g3", {"jpg": h.encode(h.smooth_image(rng, 64, 64), "jpg"), "cls": h.cls(1)}))
    path = h.write_tar(os.path.join(d, "sb.tar"), samples)
    for _ in range(3):  # a race: three tries make a pass by luck unlikely
        r = run(["-u", path, "--epochs", "1", "--meta", "-b", "4", "-w", "2", "--size", "64", "--shuffle", "0",
                 "-r", "0"], rundir)
        assert r.rc == 0, r
        assert sorted(r.keys()) == ["g0", "g1", "g2", "g3", "g3"]  # slowbad's place: its neighbour g3
        assert [b[0].shape[0] for b in r.batches] == [4, 1], r.summary()


def test_resample_reads_whole_shards_with_replacement(clean_data, rundir):
    paths, labels = clean_data
    r = run(shard_args(paths) + ["--epochs", "3", "--resample", "--meta", "-b", "8", "--size", "16",
                                 "--seed", "13", "-r", "0"], rundir)
    assert r.rc == 0, r
    counts = collections.Counter(r.keys())
    assert set(counts) <= set(labels)
    reads = []
    for s in ("c0_", "c1_"):
        per_key = {counts.get(k, 0) for k in labels if k.startswith(s)}
        assert len(per_key) == 1, (s, per_key)  # a shard is read whole, or not at all
        reads.append(per_key.pop())
    assert sum(reads) == 3 * len(paths), reads  # epochs x shards draws
