"""Determinism: the same seed gives the same images whatever the workers, restart markers change nothing, --val ignores the seed.

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
from image_server_data import run, by_key, shard_args  # noqa: E402


def test_same_seed_one_worker_no_shuffle_gives_identical_batches(clean_data, rundir):
    paths, _ = clean_data
    args = shard_args(paths) + ["--epochs", "1", "--meta", "-b", "8", "-w", "1", "--shuffle", "0",
                                "--size", "32", "--seed", "5", "-r", "0"]
    a = run(args, rundir)
    b = run(args, rundir)
    assert a.rc == 0 and b.rc == 0, (a, b)
    assert len(a.batches) == len(b.batches) == 5
    for x, y in zip(a.batches, b.batches):
        assert x[0].tobytes() == y[0].tobytes()
        assert x[1].tobytes() == y[1].tobytes()
    assert a.keys() == b.keys()
    # Without a shuffle buffer and with one worker, each shard comes whole and in its order.
    keys = a.keys()
    assert sorted(keys[:20]) == keys[:20] and sorted(keys[20:]) == keys[20:]
    assert {k[:3] for k in keys[:20]} != {k[:3] for k in keys[20:]}


def test_different_seeds_give_different_images(clean_data, rundir):
    paths, labels = clean_data
    common = shard_args(paths) + ["--epochs", "1", "--meta", "-b", "8", "-w", "1", "--shuffle", "0",
                                  "--size", "32", "-r", "0"]
    a = by_key(run(common + ["--seed", "5"], rundir))
    b = by_key(run(common + ["--seed", "6"], rundir))
    assert set(a) == set(b) == set(labels)
    differ = sum(not np.array_equal(a[k][1], b[k][1]) for k in a)
    assert differ >= 0.8 * len(a), f"only {differ} of {len(a)} images differ between seeds"


def test_same_seed_gives_same_image_per_key_whatever_the_workers(clean_data, rundir):
    # The seed decides every random choice; threads only change the order.
    paths, _ = clean_data
    common = shard_args(paths) + ["--epochs", "1", "--meta", "-b", "8", "--size", "32", "--seed", "9", "-r", "0"]
    a = by_key(run(common + ["-w", "1"], rundir))
    b = by_key(run(common + ["-w", "2"], rundir))
    assert set(a) == set(b)
    for k in a:
        assert np.array_equal(a[k][1], b[k][1]), k


def test_restart_markers_change_nothing_served(root, rundir):
    # Restart markers let the server decode only a crop's part of a JPEG:
    # the images served must be those of the same JPEGs without markers.
    rng = np.random.default_rng(5)
    d = os.path.join(root, "restart")
    os.makedirs(d)
    plain, marked = [], []
    for i in range(12):
        hh, ww = (int(v) for v in rng.integers(180, 300, 2))
        bgr = cv2.cvtColor(h.smooth_image(rng, hh, ww), cv2.COLOR_RGB2BGR)
        for out, extra in ((plain, []), (marked, [cv2.IMWRITE_JPEG_RST_INTERVAL, 1])):
            ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 90] + extra)
            assert ok
            out.append((f"r{i:03d}", {"jpg": buf.tobytes(), "cls": h.cls(i % 3)}))
    # Crops of at most a quarter of the area are at most 0.75 of these widths:
    # every one leaves whole MCU columns out, so every one is cut (a crop
    # spanning the width from the top gains nothing from a slice).
    common = ["--scale", "0.08", "0.25", "--epochs", "1", "--meta", "-b", "4", "-w", "1", "--size", "48",
              "--seed", "3", "-r", "0"]
    plain_run = run(["-u", h.write_tar(os.path.join(d, "plain.tar"), plain)] + common, rundir)
    marked_run = run(["-u", h.write_tar(os.path.join(d, "marked.tar"), marked)] + common, rundir)
    # The marked JPEGs were all cut to their crops; the plain ones never, with a hint how.
    assert "JPEGs cut at restart markers: 0 of 12" in plain_run.out, plain_run.out
    assert "hint: most JPEGs had no restart markers" in plain_run.out
    assert "JPEGs cut at restart markers: 12 of 12" in marked_run.out, marked_run.out
    assert "hint:" not in marked_run.out
    a, b = by_key(plain_run), by_key(marked_run)
    assert set(a) == set(b) and len(a) == 12
    for k in a:
        assert np.array_equal(a[k][1], b[k][1]), k


def test_val_is_deterministic_whatever_the_seed(clean_data, rundir):
    paths, labels = clean_data
    common = shard_args(paths) + ["--epochs", "1", "--meta", "-b", "8", "--size", "32", "--val", "-r", "0"]
    a = by_key(run(common + ["--seed", "5", "-w", "1", "--shuffle", "0"], rundir))
    b = by_key(run(common + ["--seed", "6", "-w", "2"], rundir))
    assert set(a) == set(b) == set(labels)
    for k in a:
        assert a[k][0] == b[k][0] == labels[k]
        assert np.array_equal(a[k][1], b[k][1]), k
