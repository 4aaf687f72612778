"""Bad input and options: refused URLs and counts, unreadable or truncated shards and images, pixel and byte limits, every skip counted by reason.

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
from image_server_data import run  # noqa: E402


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
                                          ("--epoch-batches", "-5"), ("--epoch-batches", str(2 ** 63)),
                                          ("--batch", str(2 ** 64 - 1)), ("--batch", "-1"), ("--batch", "0"),
                                          ("--size", "100000"), ("--size", str(2 ** 31 - 1)), ("--size", "0"),
                                          ("--workers", "100000"), ("--workers", "0"), ("--flip", "2"),
                                          ("--flip", "nan"), ("--flip", "-0.5")])
def test_out_of_range_counts_are_refused(clean_data, option, value):
    """Negative counts read as huge unsigned ones: refused, not waited for."""
    paths, _ = clean_data
    rc, out, err = h.run_plain(["-u", paths[0], "--epochs", "1", option, value, "zpub+ipc:///tmp/tcs-nothing"])
    assert rc == 1, (rc, out, err)
    assert option in err and "expected" in err, err
    if value.startswith("-") and option != "--flip":
        assert f"{option} {value}:" in err, err  # as typed, not as 2^64 - 1


@pytest.mark.parametrize("option,value", [("--epochs", "-1"), ("--epochs", str(2 ** 40)), ("--report", "-1"),
                                          ("--report", str(2 ** 63)), ("--read-ahead", "65"),
                                          ("--read-ahead", "-1")])
def test_out_of_range_epochs_and_reports_are_refused(clean_data, option, value):
    """--epochs -1 used to serve forever and --report -1 never to report."""
    paths, _ = clean_data
    rc, out, err = h.run_plain(["-u", paths[0], option, value, "zpub+ipc:///tmp/tcs-nothing"])
    assert rc == 1, (rc, out, err)
    assert option in err and "expected 0 to" in err, err
    assert f"{option} {value}:" in err, err  # as typed, not as 2^64 - 1


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
    assert r.summary()[2] == {"too many pixels": 4}
    r.assert_replaced(small)


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
    assert r.summary()[2] == {"too large": 6 - len(small)}
    r.assert_replaced(small)
    assert re.search(r"skipped sample 'mb[024]' of \S+: too large \(image of \d+ bytes; the limit is 20000\)", r.err), r.err
    r = run(["-d", d] + args, rundir, exe=h.DIR_EXE)
    assert r.rc == 0, r
    assert set(os.path.basename(k)[:-4] for k in r.keys()) == set(small)
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
    assert r.summary()[2] == {"truncated": 40}
    # Runs of more than 16 bad samples leave some without a good neighbour.
    r.assert_replaced([f"good{i}" for i in range(4)], every=False)


@pytest.mark.parametrize("name", [b"", b"s" * 1025, b"rank\x01", b"caf\xe9", b"\x1b[2J"])
def test_a_stream_name_that_trainers_could_not_read_is_refused(clean_data, rundir, name):
    """--stream goes into every batch's metadata and into resume tokens,
    which trainers decode as UTF-8: empty, over 1024 bytes, control
    characters and non-UTF-8 are refused with one line, nothing served."""
    paths, _ = clean_data
    done = subprocess.run([os.fsencode(h.SHARDS_EXE), b"-u", os.fsencode(paths[0]), b"--meta", b"--epochs", b"1",
                           b"--stream", name, b"zpush+ipc://" + os.fsencode(os.path.join(rundir, "never"))],
                          capture_output=True, timeout=30)
    assert done.returncode != 0, done
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    assert len(lines) == 1 and "--stream" in lines[0] and "printable UTF-8" in lines[0], done.stderr


def test_a_stream_name_of_the_longest_length_is_served(clean_data, rundir):
    """The help says 1 to 1024 bytes: a name of 1024 (past the 512 bytes a
    message shows of a name) is taken and travels in every batch."""
    paths, _ = clean_data
    name = "s" * 1024
    r = run(["-u", paths[0], "--epochs", "1", "--meta", "-b", "8", "--size", "32", "--stream", name, "-r", "0"],
            rundir)
    assert r.rc == 0, r
    assert r.metas and {m["stream"] for m in r.metas} == {name}



def test_a_folder_of_failed_downloads_serves_full_batches_of_its_good_images(root, rundir):
    """A class of 4 good JPEGs among 600 empty files: every batch full, of
    the good images only, and a few warning lines rather than one a file."""
    rng = np.random.default_rng(5)
    d = tempfile.mkdtemp(dir=root, prefix="failed")
    good = set()
    os.makedirs(os.path.join(d, "cat"))
    for i in range(604):
        name = f"img{i:04d}.jpg"
        data = b""
        if i in (17, 170, 333, 590):
            data = h.encode(h.smooth_image(rng, 40, 48), "jpg")
            good.add(name[:-4])
        with open(os.path.join(d, "cat", name), "wb") as f:
            f.write(data)
    r = run(["-d", d, "--epochs", "1", "--meta", "-b", "8", "--size", "16", "-r", "0"], rundir, exe=h.DIR_EXE)
    assert r.rc == 0, r
    assert len(r.batches) == 604 // 8 + 1
    assert all(len(b[1]) == 8 for b in r.batches[:-1]) and len(r.batches[-1][1]) == 604 % 8
    assert {os.path.basename(k)[:-4] for k in r.keys()} == good
    assert r.summary()[2] == {"empty": 600}
    assert len(r.err.splitlines()) <= 10, r.err


def test_a_stream_of_nothing_but_bad_samples_ends_with_an_error(root, rundir):
    d = tempfile.mkdtemp(dir=root, prefix="allbad")
    os.makedirs(os.path.join(d, "cat"))
    for i in range(40):
        with open(os.path.join(d, "cat", f"img{i:04d}.jpg"), "wb") as f:
            f.write(b"\xff\xd8\xff\xe0 not a jpeg" if i % 2 else b"")
    r = run(["-d", d, "--epochs", "0", "--meta", "-b", "8", "--size", "16", "-r", "0"], rundir, exe=h.DIR_EXE)
    assert r.rc == 1, r
    assert len(r.batches) == 4 and all(len(b[1]) == 0 for b in r.batches), r  # the epoch's last is not sent
    assert re.search(r"none of the first 40 samples \(to epoch 0, batch 4\) could be served, nor any sample near",
                     r.err), r.err
    assert len(r.err.splitlines()) <= 10, r.err


@pytest.mark.parametrize("flag", ["--delivery-timeout", "--wait-for-receiver"])
@pytest.mark.parametrize("value", ["-1", "nan", "1e9", "inf"])
def test_delivery_waits_out_of_range_are_refused_naming_the_flag(clean_data, flag, value):
    rc, out, err = h.run_plain(["-u", clean_data[0][0], "--epochs", "1", flag, value, "zpush+ipc:///tmp/tcs-nothing"])
    assert rc == 1, (rc, out, err)
    assert flag + " " in err and "expected 0 to 604800 seconds" in err, err


@pytest.mark.parametrize("value", ["-1", "nan", "1e9"])
def test_serve_ten_refuses_a_receiver_wait_out_of_range(tmp_path, value):
    serve_ten = os.path.join(h.BUILD_DIR, "servers", "serve-ten")
    path = tmp_path / "x.ten"
    path.write_bytes(h.tb.encode_buffer([np.zeros(4, np.uint8)]))
    proc = subprocess.run([serve_ten, "-i", str(path), "--wait-for-receiver", value, "zpush+ipc:///tmp/tcs-nothing"],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc
    assert "--wait-for-receiver " in proc.stderr and "expected 0 to 604800 seconds" in proc.stderr, proc.stderr


@pytest.mark.parametrize("extra, message", [
    (["--val-resize", "232"], "--val-resize and --crop-pct are for validation: give --val"),
    (["--val", "--val-resize", "200"], "--val-resize 200: expected from --size (224)"),
    (["--val", "--crop-pct", "1.5"], "--crop-pct 1.5: expected a share in (0, 1]"),
    (["--val", "--crop-pct", "0.9", "--val-resize", "256"], "give one"),
])
def test_validation_resizes_that_cannot_work_are_refused(clean_data, extra, message):
    paths, _ = clean_data
    rc, _, err = h.run_plain(["-u", paths[0], "--epochs", "1"] + extra + ["zpush+ipc:///tmp/tcs-nothing"])
    assert rc != 0 and message in err, err
