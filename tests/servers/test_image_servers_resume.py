"""Resumable, deterministic epochs (docs/deploy.md, "Resuming"): batches that
depend only on the seed and the data, a skipped sample replaced by its
neighbour so that every epoch keeps its batch count, and a server resumed
from a token that serves exactly the batches not yet consumed.

Run: TENSORCOM_BUILD_DIR=build pytest-3 -q -p no:cacheprovider tests/servers/
"""
import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_helpers as h  # noqa: E402
from image_server_data import CLASSES, run  # noqa: E402

BATCH = 4


def served(r):
    """{(epoch, batch): (keys, crops, flips, images, last)} of a run."""
    out = {}
    for images, meta in zip(r.images, r.metas):
        place = (meta["epoch"], meta["batch"])
        assert place not in out, f"{place} served twice"
        out[place] = (meta["keys"], meta["crops"], meta["flips"], images, meta["last"])
    return out


def same_batch(a, b):
    return a[:3] == b[:3] and np.array_equal(a[3], b[3]) and a[4] == b[4]


def args(ds, *extra):
    return ["-u", ds.pattern, "--meta", "-b", str(BATCH), "--size", "24", "--classes", str(CLASSES),
            "--seed", "7", "-r", "0", *extra]


@pytest.fixture(scope="module")
def full_run(main_data, tmp_path_factory):
    """Two epochs of 12 batches each, served whole: the reference."""
    r = run(args(main_data, "--epochs", "2", "--epoch-batches", "12", "-w", "2"),
            str(tmp_path_factory.mktemp("full")))
    assert r.rc == 0, r
    return r


def test_every_epoch_has_its_batch_count_with_skips_replaced(full_run):
    batches = served(full_run)
    assert sorted(batches) == [(e, b) for e in (0, 1) for b in range(12)]
    assert all(len(keys) == BATCH for keys, *_ in batches.values())
    assert [p for p, v in batches.items() if v[4]] == [(0, 11), (1, 11)]  # "last" on each epoch's last
    skipped = full_run.summary()[2]
    assert skipped, "the data has undecodable samples"
    assert full_run.replaced() == skipped and full_run.unfilled() == 0
    for meta in full_run.metas:
        assert meta["stream"] == "0/1" and meta["batches"] == 12 and meta["seed"] == 7
        assert len(meta["fingerprint"]) == 16


@pytest.mark.parametrize("workers", ["1", "3"])
def test_batches_depend_on_the_seed_and_data_not_the_workers(main_data, full_run, rundir, workers):
    r = run(args(main_data, "--epochs", "2", "--epoch-batches", "12", "-w", workers), rundir)
    assert r.rc == 0, r
    mine, reference = served(r), served(full_run)
    assert mine.keys() == reference.keys()
    for place in reference:
        assert same_batch(mine[place], reference[place]), place


def token(full_run, complete=0, epochs=None, **changes):
    meta = full_run.metas[0]
    stream = {"fingerprint": meta["fingerprint"], "seed": meta["seed"], "complete": complete,
              "epochs": epochs if epochs is not None else {}}
    stream.update(changes)
    return {"format": "tensorcom-resume", "version": 1, "epoch": complete, "streams": {meta["stream"]: stream}}


def write(rundir, value, name="token.json"):
    path = os.path.join(rundir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))
    return path


def test_a_resumed_server_serves_exactly_what_was_not_consumed(main_data, full_run, rundir):
    consumed = [[0, 3], [5, 9]]
    path = write(rundir, token(full_run, epochs={"0": {"consumed": consumed, "batches": 12}}))
    r = run(args(main_data, "--epochs", "2", "--epoch-batches", "12", "-w", "2", "--resume", path), rundir)
    assert r.rc == 0, r
    assert "resuming from" in r.out and "7 batches consumed before the resume" in r.out, r.out
    mine, reference = served(r), served(full_run)
    skipped = {(0, b) for a, e in consumed for b in range(a, e)}
    assert set(mine) == set(reference) - skipped
    for place, batch in mine.items():
        assert same_batch(batch, reference[place]), place  # same samples, crops, flips and pixels
    # The next epoch is an uninterrupted run's.
    assert [p for p in mine if p[0] == 1] == [(1, b) for b in range(12)]


def test_a_token_past_whole_epochs_starts_at_the_first_unfinished(main_data, full_run, rundir):
    path = write(rundir, token(full_run, complete=1, epochs={"1": {"consumed": [[11, 12]], "batches": 12}}))
    r = run(args(main_data, "--epochs", "2", "--epoch-batches", "12", "-w", "2", "--resume", path), rundir)
    assert r.rc == 0, r
    mine, reference = served(r), served(full_run)
    assert sorted(mine) == [(1, b) for b in range(11)]
    for place, batch in mine.items():
        assert same_batch(batch, reference[place]), place


@pytest.mark.parametrize("case, field", [
    ("truncated", "not a JSON resume token"),
    ("overflowing number", "not a JSON resume token"),
    ("other seed", "streams.0/1.seed"),
    ("other shards", "streams.0/1.fingerprint"),
    ("out of bounds", "streams.0/1.epochs.0.consumed"),
    ("reversed", "streams.0/1.epochs.0.consumed"),
    ("overlapping", "streams.0/1.epochs.0.consumed"),
    ("huge number", "streams.0/1.complete"),
    ("negative", "streams.0/1.complete"),
    ("other epoch count", "streams.0/1.epochs.0.batches"),
    ("not an epoch", "streams.0/1.epochs"),
    ("no streams", "'streams' is missing"),
    ("wrong format", "'format'"),
])
def test_hostile_tokens_are_refused_naming_the_field(main_data, full_run, rundir, case, field):
    good = token(full_run, epochs={"0": {"consumed": [[0, 2]], "batches": 12}})
    text = json.dumps(good)
    bad = json.loads(text)
    stream = bad["streams"]["0/1"]
    if case == "truncated":
        bad = text[: len(text) // 2]
    elif case == "other seed":
        stream["seed"] = 8
    elif case == "other shards":
        stream["fingerprint"] = "0123456789abcdef"
    elif case == "out of bounds":
        stream["epochs"]["0"]["consumed"] = [[0, 13]]
    elif case == "reversed":
        stream["epochs"]["0"]["consumed"] = [[5, 2]]
    elif case == "overlapping":
        stream["epochs"]["0"]["consumed"] = [[0, 5], [3, 7]]
    elif case == "huge number":
        stream["complete"] = 10 ** 30
    elif case == "negative":
        stream["complete"] = -1
    elif case == "other epoch count":
        stream["epochs"]["0"]["batches"] = 13
    elif case == "not an epoch":
        stream["epochs"]["x"] = {"consumed": []}
    elif case == "no streams":
        del bad["streams"]
    elif case == "wrong format":
        bad["format"] = "something else"
    path = write(rundir, json.dumps(bad).replace('"version": 1', '"version": 8e8333333')
                 if case == "overflowing number" else bad)
    r = run(args(main_data, "--epochs", "1", "--epoch-batches", "12", "--resume", path), rundir)
    assert r.rc != 0, r
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert len(lines) == 1 and field in lines[0] and path in lines[0], r.err
    assert not r.batches


def test_a_token_that_is_no_file_is_refused(main_data, rundir):
    r = run(args(main_data, "--epochs", "1", "--resume", "/dev/zero"), rundir)
    assert r.rc != 0 and "/dev/zero" in r.err and not r.batches, r


@pytest.mark.parametrize("kind", ["gzip shards", "folder"])
def test_a_resumed_server_reads_what_it_cannot_find_again_and_serves_the_same(main_data, rundir, kind):
    """Images of plain shards are read later by offset; gzip shards cannot be
    sought in (read at once, consumed ones still not decoded) and folder
    images are read by their file: the resumed epoch is the same either way."""
    import glob
    import gzip
    import shutil
    import tarfile
    if kind == "gzip shards":
        for shard in sorted(glob.glob(main_data.pattern.replace("{000..003}", "*"))):
            with open(shard, "rb") as src, gzip.open(os.path.join(rundir, os.path.basename(shard) + ".gz"), "wb") as dst:
                shutil.copyfileobj(src, dst)
        source = ["-u", os.path.join(rundir, "shard-{000..003}.tar.gz")]
    else:
        folder = os.path.join(rundir, "folder")
        with tarfile.open(main_data.pattern.replace("{000..003}", "000")) as tar:
            for m in tar:
                if m.isfile() and m.name.endswith(".jpg"):
                    os.makedirs(os.path.join(folder, f"c{len(m.name) % 3}"), exist_ok=True)
                    with open(os.path.join(folder, f"c{len(m.name) % 3}", os.path.basename(m.name)), "wb") as f:
                        f.write(tar.extractfile(m).read())
        source = ["-d", folder]
    exe = {"exe": h.DIR_EXE} if kind == "folder" else {}
    common = [*source, "--meta", "-b", str(BATCH), "--size", "24", "--seed", "7", "-r", "0", "--epochs", "1",
              "--epoch-batches", "8", "-w", "2"]
    reference = run(common, rundir, **exe)
    assert reference.rc == 0, reference
    meta = reference.metas[0]
    stream = {"fingerprint": meta["fingerprint"], "seed": 7, "complete": 0,
              "epochs": {"0": {"consumed": [[0, 6]], "batches": 8}}}
    path = write(rundir, {"format": "tensorcom-resume", "version": 1, "epoch": 0, "streams": {"0/1": stream}})
    r = run(common + ["--resume", path], rundir, **exe)
    assert r.rc == 0, r
    mine, full = served(r), served(reference)
    assert sorted(mine) == [(0, 6), (0, 7)]
    assert "6 batches consumed before the resume" in r.out, r.out
    for place, batch in mine.items():
        assert same_batch(batch, full[place]), place
