"""Resolution by epoch (--size-schedule, FFCV's progressive resizing): every
batch of an epoch at that epoch's size, its metadata naming both, batches
never straddling a size change, FFCV's rounding, bad schedules refused.

Run: TENSORCOM_BUILD_DIR=build pytest-3 -q -p no:cacheprovider tests/servers/
"""
import collections
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_helpers as h  # noqa: E402
from image_server_data import run, shard_args  # noqa: E402

NOWHERE = "zpush+ipc:///tmp/tcs-nothing"


def ffcv_size(epoch, start, end, start_epoch, end_epoch):
    """FFCV's get_resolution (train_imagenet.py), the model the servers follow."""
    if epoch <= start_epoch:
        return start
    if epoch >= end_epoch:
        return end
    interp = np.interp([epoch], [start_epoch, end_epoch], [start, end])
    return int(np.round(interp[0] / 32)) * 32


def by_epoch(r, layout="BHWC"):
    """{epoch: [(images, meta)]} in the order received; checks every batch's
    shape against its metadata's size and that epochs come in order."""
    out = collections.OrderedDict()
    for images, meta in zip(r.images, r.metas):
        size = meta["size"]
        n = images.shape[0]
        assert n == len(meta["keys"])
        expected = (n, size, size, 3) if layout == "BHWC" else (n, 3, size, size)
        assert images.shape == expected, (images.shape, meta["epoch"], size)
        assert not out or meta["epoch"] >= next(reversed(out)), "epochs out of order"
        out.setdefault(meta["epoch"], []).append((images, meta))
    return out


def check_epochs(r, keys, batch, schedule, epochs, layout="BHWC"):
    """Every epoch: its scheduled size, every key once, full batches but its last."""
    got = by_epoch(r, layout)
    assert list(got) == list(range(epochs)), list(got)
    for epoch, batches in got.items():
        sizes = {meta["size"] for _, meta in batches}
        assert sizes == {ffcv_size(epoch, *schedule)}, (epoch, sizes)
        served = collections.Counter(k for _, meta in batches for k in meta["keys"])
        assert set(served) == set(keys) and set(served.values()) == {1}, epoch
        counts = [images.shape[0] for images, _ in batches]
        assert counts == [batch] * (len(keys) // batch) + ([len(keys) % batch] if len(keys) % batch else []), counts
    return got


def test_each_epoch_at_its_scheduled_size(clean_data, rundir):
    paths, labels = clean_data  # 40 samples: batches of 6 leave 4 over each epoch
    schedule = (64, 128, 1, 3)
    r = run([*shard_args(paths), "--epochs", "4", "--size-schedule", "64,128,1,3", "--meta", "-b", "6", "-w", "2",
             "-r", "0"], rundir)
    assert r.rc == 0, r
    got = check_epochs(r, labels, 6, schedule, 4)
    assert [got[e][0][1]["size"] for e in range(4)] == [64, 64, 96, 128]
    assert [m["seq"] for m in r.metas] == list(range(len(r.batches)))
    # A line where each size begins, none where it stays.
    assert "epoch 0: size 64 (--size-schedule)" in r.out, r.out
    assert "epoch 1: size" not in r.out
    assert "epoch 2: size 96 (--size-schedule)" in r.out and "epoch 3: size 128 (--size-schedule)" in r.out
    served, nbatches, _, _ = r.summary()
    assert (served, nbatches) == (160, 28)


def test_rounding_is_ffcvs_half_to_even(clean_data, rundir):
    paths, labels = clean_data
    # Epoch 1 is 80 / 32 = 2.5 and epoch 3 is 112 / 32 = 3.5: np.round gives 64
    # and 128 where rounding halves up would give 96 and 128.
    schedule = (64, 128, 0, 4)
    r = run([*shard_args(paths), "--epochs", "5", "--size-schedule", "64,128,0,4", "--meta", "-b", "8", "-w", "2",
             "-r", "0"], rundir)
    assert r.rc == 0, r
    got = check_epochs(r, labels, 8, schedule, 5)
    assert [got[e][0][1]["size"] for e in range(5)] == [64, 64, 96, 128, 128]


def test_float_bchw_and_epoch_batches_across_a_size_change(clean_data, rundir):
    paths, labels = clean_data
    r = run([*shard_args(paths), "--epochs", "2", "--size-schedule", "32,64,0,1", "--meta", "-b", "7", "-w", "2",
             "--epoch-batches", "5", "--layout", "BCHW", "--dtype", "float16", "-r", "0"], rundir)
    assert r.rc == 0, r
    got = by_epoch(r, "BCHW")
    assert list(got) == [0, 1]
    for epoch, size in ((0, 32), (1, 64)):
        assert [images.shape for images, _ in got[epoch]] == [(7, 3, size, size)] * 5
        assert all(images.dtype == np.float16 and np.isfinite(images).all() for images, _ in got[epoch])


def test_dir_server_follows_the_schedule(folder, rundir):
    d, files = folder  # 12 training images
    r = run(["-d", d, "--epochs", "2", "--size-schedule", "32,64,0,1", "--meta", "-b", "5", "-r", "0"], rundir,
            exe=h.DIR_EXE)
    assert r.rc == 0, r
    got = by_epoch(r)
    assert [[images.shape for images, _ in got[e]] for e in (0, 1)] == [
        [(5, 32, 32, 3), (5, 32, 32, 3), (2, 32, 32, 3)], [(5, 64, 64, 3), (5, 64, 64, 3), (2, 64, 64, 3)]]


def test_without_a_schedule_metadata_names_epoch_and_size(clean_data, rundir):
    paths, _ = clean_data
    # One worker: with more, a batch at an epoch's end may also hold the next
    # epoch's first samples (no schedule, no barrier) and names the earlier.
    r = run([*shard_args(paths), "--epochs", "2", "--meta", "-b", "8", "-w", "1", "--size", "40", "-r", "0"], rundir)
    assert r.rc == 0, r
    assert {m["size"] for m in r.metas} == {40}
    assert [m["epoch"] for m in r.metas] == [0] * 5 + [1] * 5


@pytest.mark.parametrize("value, message", [
    ("", "four whole numbers"),
    ("160,192,0", "four whole numbers"),
    ("160,192,0,10,12", "four whole numbers"),
    ("160,192,-1,10", "four whole numbers"),
    ("160,x,0,10", "four whole numbers"),
    ("0,192,0,10", "sizes must be 1 to 8192"),
    ("160,9000,0,10", "sizes must be 1 to 8192"),
    ("192,160,0,10", "the start size is larger than the end size"),
    ("160,192,10,2", "the end epoch is before the start epoch"),
    ("1,20,0,4", "rounds to size 0 at epoch 1"),
])
def test_bad_schedules_are_refused(clean_data, value, message):
    paths, _ = clean_data
    rc, out, err = h.run_plain([*shard_args(paths), "--epochs", "1", "--size-schedule", value, NOWHERE])
    assert rc != 0 and out == "", (rc, out)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--size-schedule" in lines[0] and message in lines[0], err


@pytest.mark.parametrize("extra, message", [
    (["--val"], "--size-schedule is for training: --val serves every epoch at its --size"),
    (["--size", "224"], "--size-schedule sets the size of every epoch: drop --size"),
])
def test_schedule_with_val_or_size_is_refused(clean_data, extra, message):
    paths, _ = clean_data
    rc, out, err = h.run_plain([*shard_args(paths), "--epochs", "1", "--size-schedule", "160,192,0,2", *extra,
                                NOWHERE])
    assert rc != 0 and message in err and len(err.strip().splitlines()) == 1, err
