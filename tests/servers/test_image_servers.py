"""Integration tests of serve-imagenet-shards and serve-imagenet-dir.

Shards are written here with tarfile and cv2.imencode; the servers push
batches on zpush+ipc:// to a PULL socket bound by the test (see
server_helpers.run_server), with a timeout on every receive and the server
killed in a finally.

Environment: TENSORCOM_BUILD_DIR, the meson build dir (servers/...).
Run: TENSORCOM_BUILD_DIR=build pytest-3 -q -p no:cacheprovider tests/servers/test_image_servers.py
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

for exe in (h.SHARDS_EXE, h.DIR_EXE):
    if not os.access(exe, os.X_OK):
        pytest.skip(f"{exe} not built (TENSORCOM_BUILD_DIR={h.BUILD_DIR!r})", allow_module_level=True)

CLASSES = 10


@pytest.fixture(scope="module")
def root():
    d = tempfile.mkdtemp(dir="/tmp", prefix="tcs")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def rundir(root):
    """A fresh short dir for one test's sockets and output files."""
    return tempfile.mkdtemp(dir=root, prefix="r")


def run(args, rundir, **kw):
    return h.run_server(args, tempfile.mkdtemp(dir=rundir, prefix="x"), **kw)


# --- the main data set: 3 good shards with bad samples, 1 truncated tar -----------

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


@pytest.fixture(scope="module")
def main_data(root):
    return make_main_dataset(root)


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


# --- 1. exactly once ----------------------------------------------------------------

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
    assert all(c == 1 for c in counts.values()), {k: c for k, c in counts.items() if c != 1}
    assert served == len(ds.good)
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


# --- 2. two epochs ----------------------------------------------------------------------

def test_two_epochs_serve_every_good_sample_twice(main_data, rundir):
    ds = main_data
    r = run(["-u", ds.pattern, "--epochs", "2", "--meta", "-b", "8", "-w", "2", "--size", "32",
             "--classes", str(CLASSES), "--seed", "2", "-r", "0"], rundir)
    assert r.rc == 0, r
    check_batches(r, 32, 8)
    keys = r.keys()
    counts = collections.Counter(keys)
    assert set(counts) == set(ds.good)
    assert all(c == 2 for c in counts.values()), {k: c for k, c in counts.items() if c != 2}
    assert len(keys) == 2 * len(ds.good)
    served, nbatches, skipped, shard_errors = r.summary()
    assert served == 2 * len(ds.good) and nbatches == len(r.batches)
    check_skips(skipped, ds, multiplier=2)
    assert shard_errors == 2


# --- a small clean data set for determinism, layout, pipes --------------------------------

@pytest.fixture(scope="module")
def clean_data(root):
    """Two shards of 20 smooth JPEG/PNG images each: (paths, {key: label})."""
    rng = np.random.default_rng(77)
    d = os.path.join(root, "clean")
    os.makedirs(d)
    paths, labels = [], {}
    for s in range(2):
        samples = []
        for i in range(20):
            hh, ww = (int(v) for v in rng.integers(96, 161, 2))
            ext = "png" if i % 4 == 3 else "jpg"
            key = f"c{s}_{i:03d}"
            label = int(rng.integers(0, 5))
            labels[key] = label
            samples.append((key, {ext: h.encode(h.smooth_image(rng, hh, ww), ext), "cls": h.cls(label)}))
        path = os.path.join(d, f"clean-{s}.tar")
        h.write_tar(path, samples)
        paths.append(path)
    return paths, labels


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


# --- 3. determinism -----------------------------------------------------------------------

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


# --- 4. colours and orientation ------------------------------------------------------------

COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 255, 255), (0, 0, 0), (200, 100, 50)]


@pytest.fixture(scope="module")
def colour_data(root):
    d = os.path.join(root, "colour")
    os.makedirs(d)
    samples, colours = [], {}
    for i, rgb in enumerate(COLOURS):
        img = np.zeros((80, 100, 3), np.uint8)
        img[:] = rgb
        for ext in ("jpg", "png"):
            key = f"col{i}_{ext}"
            colours[key] = rgb
            samples.append((key, {ext: h.encode(img, ext, quality=95), "cls": h.cls(i)}))
    for i, rgb in enumerate(COLOURS[:4]):
        img = np.zeros((60, 70, 3), np.uint16)
        img[:] = [c * 257 for c in rgb]
        key = f"col{i}_png16"
        colours[key] = rgb
        samples.append((key, {"png": h.encode(img, "png"), "cls": h.cls(i)}))
    grey = np.full((60, 70), 128, np.uint8)
    for ext in ("jpg", "png"):
        colours[f"grey_{ext}"] = (128, 128, 128)
        samples.append((f"grey_{ext}", {ext: h.encode(grey, ext, quality=95), "cls": h.cls(0)}))
    path = h.write_tar(os.path.join(d, "colours.tar"), samples)
    halves = []
    for ext in ("jpg", "png"):
        img = np.zeros((96, 128, 3), np.uint8)
        img[:, 64:] = 255
        halves.append((f"half_{ext}", {ext: h.encode(img, ext, quality=95), "cls": h.cls(0)}))
    half_path = h.write_tar(os.path.join(d, "halves.tar"), halves)
    return path, colours, half_path


def test_solid_colours_are_served_in_rgb_order(colour_data, rundir):
    path, colours, _ = colour_data
    r = run(["-u", path, "--epochs", "1", "--meta", "-b", "4", "--size", "32", "-r", "0"], rundir)
    assert r.rc == 0, r
    got = by_key(r)
    assert set(got) == set(colours)
    for key, (_, image) in got.items():
        diff = np.abs(image.astype(int) - np.array(colours[key])).max()
        assert diff <= 10, f"{key}: expected {colours[key]}, got mean {image.reshape(-1, 3).mean(0)}"


def _left_right(image):
    s = image.shape[1]
    return image[:, : s // 2 - 2].mean(), image[:, s // 2 + 2:].mean()


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


# --- 5. layout and dtype ----------------------------------------------------------------------

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


# --- 6. pipe: shards ---------------------------------------------------------------------------

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


# --- 7. rank and world ---------------------------------------------------------------------------

def test_ranks_split_the_shards(main_data, rundir):
    ds = main_data
    parts = []
    for rank in ("0", "1"):
        r = run(["-u", ds.pattern, "--epochs", "1", "--meta", "-b", "8", "--size", "32",
                 "--classes", str(CLASSES), "--seed", "11", "--rank", rank, "--world", "2", "-r", "0"], rundir)
        assert r.rc == 0, r
        counts = collections.Counter(r.keys())
        assert all(c == 1 for c in counts.values())
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


# --- 8. serve-imagenet-dir -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def folder(root):
    rng = np.random.default_rng(5)
    d = os.path.join(root, "folder")
    files = {}
    for split in ("train", "val"):
        for cls_name in ("cat", "dog", "ant"):
            os.makedirs(os.path.join(d, split, cls_name))
            n = 4 if split == "train" else 2
            for i in range(n):
                ext = "png" if i == 1 else "jpg"
                p = os.path.join(d, split, cls_name, f"{cls_name}{i}.{ext}")
                with open(p, "wb") as f:
                    f.write(h.encode(h.smooth_image(rng, 80, 96), ext))
                files.setdefault(split, {})[p] = {"ant": 0, "cat": 1, "dog": 2}[cls_name]
            with open(os.path.join(d, split, cls_name, "README.txt"), "w") as f:
                f.write("not an image\n")
    return d, files


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


# --- 9. errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["zbogus+ipc:///tmp/tcs-nothing", "zpush+tcp://127.0.0.1:notaport"])
def test_bad_url_exits_1_naming_it(clean_data, url):
    paths, _ = clean_data
    rc, out, err = h.run_plain(["-u", paths[0], "--epochs", "1", url])
    assert rc == 1, (rc, out, err)
    assert url in err, err


def test_missing_shards_option_exits_2():
    rc, out, err = h.run_plain(["--epochs", "1", "zpush+ipc:///tmp/tcs-nothing"])
    assert rc == 2, (rc, out, err)
    assert "shards" in err or "-u" in err, err


@pytest.mark.parametrize("option,value", [("--subscribers", "-1"), ("--subscribers", "100001"),
                                          ("--epoch-batches", "-5"), ("--epoch-batches", str(2 ** 63))])
def test_out_of_range_counts_are_refused(clean_data, option, value):
    """Negative counts read as huge unsigned ones: refused, not waited for."""
    paths, _ = clean_data
    rc, out, err = h.run_plain(["-u", paths[0], "--epochs", "1", option, value, "zpub+ipc:///tmp/tcs-nothing"])
    assert rc == 1, (rc, out, err)
    assert option in err and "expected" in err, err


@pytest.mark.parametrize("value", ["nearest", "", "BILINEAR", "bilinear\x1b[2J" + "x" * 5000])
def test_unknown_interpolation_exits_1_naming_the_choices(clean_data, value):
    paths, _ = clean_data
    rc, out, err = h.run_plain(["-u", paths[0], "--epochs", "1", "--interpolation", value, "zpush+ipc:///tmp/tcs-nothing"])
    assert rc == 1, (rc, out, err)
    assert "--interpolation must be bilinear, bicubic or fast" in err, err
    assert "\x1b" not in err  # escaped, as every outside text in a message


def test_all_shards_missing_exits_1_saying_no_samples(root, rundir):
    pattern = os.path.join(root, "nowhere-{0..2}.tar")
    r = run(["-u", pattern, "--epochs", "1", "-b", "4", "--size", "32", "-r", "0"], rundir)
    assert r.rc == 1, r
    assert "no samples" in r.err, r.err
    assert not r.batches


def test_unreadable_shards_are_skipped_and_counted(clean_data, root, rundir):
    paths, labels = clean_data
    d = tempfile.mkdtemp(dir=root, prefix="un")
    missing = os.path.join(d, "missing.tar")
    empty = h.write_tar(os.path.join(d, "empty.tar"), [])
    junk = os.path.join(d, "junk.tar")
    with open(junk, "wb") as f:
        f.write(np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    r = run(["-u", missing, "-u", paths[1], "-u", empty, "-u", junk, "--epochs", "1", "--meta", "-b", "8",
             "--size", "16", "-r", "0"], rundir)
    assert r.rc == 0, r
    assert sorted(r.keys()) == sorted(k for k in labels if k.startswith("c1_"))
    assert r.summary()[2:] == ({}, 2), r
    assert missing in r.err and junk in r.err and empty not in r.err, r.err


def test_dir_server_on_missing_dir_exits_1(root):
    missing = os.path.join(root, "no-such-dir")
    rc, out, err = h.run_plain(["-d", missing, "--epochs", "1", "zpush+ipc:///tmp/tcs-nothing"], exe=h.DIR_EXE)
    assert rc == 1, (rc, out, err)
    assert missing in err, err


# --- more skip reasons and known problems ---------------------------------------------------------

def test_max_pixels_skips_large_images(root, rundir):
    rng = np.random.default_rng(3)
    d = tempfile.mkdtemp(dir=root, prefix="px")
    samples, small = [], set()
    for i in range(8):
        side = 64 if i % 2 else 128
        ext = "png" if i % 4 < 2 else "jpg"
        key = f"px{i}"
        if side == 64:
            small.add(key)
        samples.append((key, {ext: h.encode(h.smooth_image(rng, side, side), ext), "cls": h.cls(1)}))
    path = h.write_tar(os.path.join(d, "px.tar"), samples)
    r = run(["-u", path, "--epochs", "1", "--meta", "-b", "4", "--size", "32", "--max-pixels", "10000", "-r", "0"],
            rundir)
    assert r.rc == 0, r
    assert set(r.keys()) == small and len(r.keys()) == len(small)
    assert r.summary()[2] == {"too many pixels": 4}


def test_max_image_bytes_skips_large_files_unread(root, rundir):
    rng = np.random.default_rng(4)
    d = tempfile.mkdtemp(dir=root, prefix="mb")
    samples, small = [], set()
    folder = os.path.join(d, "train", "c")
    os.makedirs(folder)
    for i in range(6):
        # Smooth pictures compress to a few kilobytes; noise stays about 120 kB.
        pixels = h.smooth_image(rng, 64, 64) if i % 2 else rng.integers(0, 255, (200, 200, 3), dtype=np.uint8)
        image = h.encode(pixels, "png")
        samples.append((f"mb{i}", {"png": image, "cls": h.cls(1)}))
        with open(os.path.join(folder, f"mb{i}.png"), "wb") as f:
            f.write(image)
        if len(image) <= 20000:
            small.add(f"mb{i}")
    assert 0 < len(small) < 6
    path = h.write_tar(os.path.join(d, "mb.tar"), samples)
    args = ["--epochs", "1", "--meta", "-b", "1", "--size", "32", "--max-image-bytes", "20000", "-r", "0"]
    r = run(["-u", path] + args, rundir)
    assert r.rc == 0, r
    assert sorted(r.keys()) == sorted(small)
    assert r.summary()[2] == {"too large": 6 - len(small)}
    assert re.search(r"skipped sample 'mb0' of \S+: too large \(image of \d+ bytes; the limit is 20000\)", r.err), r.err
    r = run(["-d", d] + args, rundir, exe=h.DIR_EXE)
    assert r.rc == 0, r
    assert sorted(os.path.basename(k)[:-4] for k in r.keys()) == sorted(small)
    assert r.summary()[2] == {"too large": 6 - len(small)}


def test_truncated_jpegs_are_never_served(root, rundir):
    rng = np.random.default_rng(8)
    d = tempfile.mkdtemp(dir=root, prefix="tr")
    samples = []
    for i in range(40):
        whole = h.encode(h.smooth_image(rng, 160, 128), "jpg")
        samples.append((f"t{i:03d}", {"jpg": whole[: len(whole) * 3 // 4], "cls": h.cls(1)}))
    for i in range(4):
        samples.append((f"good{i}", {"jpg": h.encode(h.smooth_image(rng, 160, 128), "jpg"), "cls": h.cls(1)}))
    path = h.write_tar(os.path.join(d, "trunc.tar"), samples)
    r = run(["-u", path, "--epochs", "1", "--meta", "-b", "8", "--size", "32", "--seed", "0", "-r", "0"], rundir)
    assert r.rc == 0, r
    assert sorted(r.keys()) == [f"good{i}" for i in range(4)]
    assert r.summary()[2] == {"truncated": 40}


def test_only_the_last_batch_is_short(root, rundir):
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
        assert sorted(r.keys()) == ["g0", "g1", "g2", "g3"]
        assert [b[0].shape[0] for b in r.batches] == [4], r.summary()


# --- other shard formats, transports, signals, resampling ---------------------------------------

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
        while pull.poll(5000):
            arrays, infos = h.tb.decode_message(pull.recv_multipart(), with_infos=True)
            keys += h.msgpack.unpackb(arrays[2].tobytes())["keys"]
            if len(keys) == 20:
                break
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, (out, err)
        assert sorted(keys) == sorted(k for k in labels if k.startswith("c0_"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        pull.close(linger=0)
        ctx.term()


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
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        pull.close(linger=0)
        ctx.term()


def receive(pull, count, timeout_s=5, pause_s=0.0):
    for _ in range(count):
        assert pull.poll(timeout_s * 1000), f"no batch within {timeout_s} s"
        pull.recv_multipart()
        if pause_s:
            time.sleep(pause_s)


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
        receive(pull, 4)  # libarchive may wait for more output before it gives the last sample
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
        receive(pull, 100, timeout_s=10)  # 40 epochs: every buffer and queue at its working size
        warm = _rss_bytes(proc.pid)
        samples = []
        for _ in range(5):
            receive(pull, 100, timeout_s=10, pause_s=0.001)
            samples.append(_rss_bytes(proc.pid))
    assert 600 * batch >= 200 * len(labels)
    growth = max(samples) - warm
    assert growth < 4 << 20, f"RSS {warm >> 20} MiB after warm-up, then {[s >> 20 for s in samples]} MiB"


@contextmanager
def pub_server(args):
    """serve-imagenet-shards ARGS publishing on zpub tcp://127.0.0.1:0:
    (process, the bound tcp address); killed if still running."""
    proc = subprocess.Popen([h.SHARDS_EXE, *args, "zpub://127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
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


def write_zero_members_tgz(path, count, size, good=()):
    """A .tar.gz of `count` zero-filled "jpg" members of `size` bytes (a few
    hundred KB on disk), then the (key, members) samples of `good`."""
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for i in range(count):
            info = tarfile.TarInfo(f"zero{i:02d}.jpg")
            info.size = size
            tar.addfile(info, io.BufferedReader(_Zeros(size), 1 << 20))
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


def test_memory_limit_bounds_buffered_samples_in_bytes(root, rundir):
    """Sixteen 40 MB members (a 640 MB shard that packs into a few hundred KB)
    must not all sit in the shuffle buffer: --memory-limit bounds it in bytes."""
    if _sanitized(h.SHARDS_EXE):
        pytest.skip("sanitizer build: its allocator keeps freed memory on purpose")
    rng = np.random.default_rng(21)
    d = tempfile.mkdtemp(dir=root, prefix="ml")
    path = write_zero_members_tgz(os.path.join(d, "zeros.tar.gz"), 16, 40 << 20, good_samples(rng, 4, "g"))
    assert os.path.getsize(path) < 4 << 20
    args = ["-u", path, "--epochs", "1", "--meta", "-b", "1", "--size", "32", "-r", "0"]
    r = run(args + ["--memory-limit", str(64 << 20)], rundir)
    assert r.rc == 0, r
    assert sorted(r.keys()) == [f"g{i}" for i in range(4)]
    assert r.summary()[2] == {"missing label": 16}, r.summary()
    # The reader's member, one in the queue, one in the shuffle buffer, one
    # per worker: about five members, not sixteen.
    assert peak_memory_mib(r) < 360, r.out


def test_running_out_of_memory_in_one_shard_ends_only_that_shard(root, rundir):
    """An allocation failure while reading a shard (a 300 MB member under a
    tight address-space limit) abandons that shard with a message; the
    other shard is served and the server exits normally."""
    if _sanitized(h.SHARDS_EXE):
        pytest.skip("sanitizer build: its shadow memory needs the address space")
    import resource
    rng = np.random.default_rng(22)
    d = tempfile.mkdtemp(dir=root, prefix="oom")
    huge = write_zero_members_tgz(os.path.join(d, "a-huge.tar.gz"), 1, 300 << 20)
    good = h.write_tar(os.path.join(d, "b-good.tar"), good_samples(rng, 4, "g"))
    limit = 900 << 20

    def cap_address_space():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    args = ["-u", "{" + huge + "," + good + "}", "--epochs", "1", "--meta", "-b", "1", "--size", "32", "-r", "0",
            "--shuffle", "0", "-w", "1", "--max-image-bytes", str(512 << 20), "--memory-limit", str(64 << 20)]
    r = run(args, rundir, preexec_fn=cap_address_space)
    assert r.rc == 0, r
    assert sorted(r.keys()) == [f"g{i}" for i in range(4)]
    assert r.summary()[3] == 1
    assert re.search(r"a-huge\.tar\.gz abandoned: out of memory while reading it", r.err), r.err
