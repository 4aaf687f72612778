"""Pixels: RGB order, orientation and flips, torchvision's Resize + CenterCrop, float layouts, single-buffer messages.

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
from image_server_data import run, check_batches, by_key, shard_args, _left_right  # noqa: E402


def test_solid_colours_are_served_in_rgb_order(colour_data, rundir):
    path, colours, _ = colour_data
    r = run(["-u", path, "--epochs", "1", "--meta", "-b", "4", "--size", "32", "-r", "0"], rundir)
    assert r.rc == 0, r
    got = by_key(r)
    assert set(got) == set(colours)
    for key, (_, image) in got.items():
        diff = np.abs(image.astype(int) - np.array(colours[key])).max()
        assert diff <= 10, f"{key}: expected {colours[key]}, got mean {image.reshape(-1, 3).mean(0)}"


def test_val_keeps_left_dark_and_right_bright(colour_data, rundir):
    _, _, half_path = colour_data
    for seed in ("1", "2"):
        r = run(["-u", half_path, "--epochs", "1", "--meta", "-b", "2", "--size", "32", "--val",
                 "--seed", seed, "-r", "0"], rundir)
        assert r.rc == 0, r
        got = by_key(r)
        assert set(got) == {"half_jpg", "half_png"}
        for key, (_, image) in got.items():
            left, right = _left_right(image)
            assert left < 30 and right > 225, (key, left, right)


def test_flip_option_mirrors_the_image(colour_data, rundir):
    # --scale 1 1 keeps the whole (4:3) image; --flip 1 always mirrors it.
    _, _, half_path = colour_data
    for flip, dark_left in (("0", True), ("1", False)):
        r = run(["-u", half_path, "--epochs", "1", "--meta", "-b", "2", "--size", "32", "--scale", "1", "1",
                 "--flip", flip, "-r", "0"], rundir)
        assert r.rc == 0, r
        for key, (_, image) in by_key(r).items():
            left, right = _left_right(image)
            assert (left < 30 and right > 225) if dark_left else (left > 225 and right < 30), (flip, key, left, right)


def test_val_matches_resize_shorter_side_and_centre_crop(root, rundir):
    # A Python reference of torchvision's Resize(size*256/224) + CenterCrop(size).
    rng = np.random.default_rng(12)
    d = tempfile.mkdtemp(dir=root, prefix="val")
    samples, images = [], {}
    for i in range(8):
        hh, ww = (int(v) for v in rng.integers(64, 200, 2))
        img = h.smooth_image(rng, hh, ww)
        ext = "png" if i % 2 else "jpg"
        images[f"v{i}"] = img
        samples.append((f"v{i}", {ext: h.encode(img, ext, quality=98), "cls": h.cls(1)}))
    path = h.write_tar(os.path.join(d, "val.tar"), samples)
    for size in (32, 64):
        r = run(["-u", path, "--epochs", "1", "--meta", "-b", "8", "--size", str(size), "--val", "-r", "0"], rundir)
        assert r.rc == 0, r
        resize_to = round(size * 256 / 224)
        for key, _, image in r.samples():
            src = images[key]
            scale = resize_to / min(src.shape[:2])
            w = max(resize_to, round(src.shape[1] * scale))
            hgt = max(resize_to, round(src.shape[0] * scale))
            resized = h.cv2.resize(src, (w, hgt), interpolation=h.cv2.INTER_AREA)
            y0, x0 = (hgt - size) // 2, (w - size) // 2
            ref = resized[y0:y0 + size, x0:x0 + size].astype(int)
            diff = np.abs(ref - image)
            assert diff.mean() <= 5 and diff.max() <= 16, (size, key, src.shape, diff.mean(), diff.max())


def test_float_layouts_match_normalised_uint8(clean_data, rundir):
    paths, _ = clean_data
    common = shard_args(paths) + ["--epochs", "1", "--meta", "-b", "8", "-w", "1", "--shuffle", "0",
                                  "--size", "32", "--val", "--seed", "3", "-r", "0"]
    u8 = run(common, rundir)
    f32 = run(common + ["--layout", "BCHW", "--dtype", "float32"], rundir)
    f16 = run(common + ["--layout", "BCHW", "--dtype", "float16"], rundir)
    u8c = run(common + ["--layout", "BCHW"], rundir)
    f16h = run(common + ["--dtype", "float16"], rundir)
    for r in (u8, f32, f16, u8c, f16h):
        assert r.rc == 0, r
        assert r.keys() == u8.keys()
    ref = np.concatenate(u8.images)
    assert ref.dtype == np.uint8 and ref.shape == (40, 32, 32, 3)
    expected = h.normalise(ref)  # BHWC float64
    a32 = np.concatenate(f32.images)
    assert a32.dtype == np.float32 and a32.shape == (40, 3, 32, 32)
    assert np.abs(a32.astype(np.float64) - expected.transpose(0, 3, 1, 2)).max() <= 1e-5
    a16 = np.concatenate(f16.images)
    assert a16.dtype == np.float16 and a16.shape == (40, 3, 32, 32)
    assert np.abs(a16.astype(np.float64) - expected.transpose(0, 3, 1, 2)).max() <= 1e-2
    ac = np.concatenate(u8c.images)
    assert ac.dtype == np.uint8 and ac.shape == (40, 3, 32, 32)
    assert np.array_equal(ac, ref.transpose(0, 3, 1, 2))
    ah = np.concatenate(f16h.images)
    assert ah.dtype == np.float16 and ah.shape == (40, 32, 32, 3)
    assert np.abs(ah.astype(np.float64) - expected).max() <= 1e-2
    for r in (f32, f16, u8c, f16h):
        assert np.array_equal(np.concatenate(r.labels), np.concatenate(u8.labels))


def test_single_buffer_messages(clean_data, rundir):
    paths, labels = clean_data
    r = run(shard_args(paths) + ["--epochs", "1", "--meta", "-b", "8", "--size", "32", "--single", "-r", "0"],
            rundir)
    assert r.rc == 0, r
    check_batches(r, 32, 8)
    assert sorted(r.keys()) == sorted(labels)
