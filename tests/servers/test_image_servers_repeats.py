"""Repeated augmentation (--ra-reps): the samples each rank serves and how
often, against torchvision's RASampler and timm's RepeatAugSampler (their
index arithmetic restated here); the repeats' augmentations differ; a
resumed epoch serves the rest; flags that cannot work are refused.

Run: TENSORCOM_BUILD_DIR=build pytest-3 -q -p no:cacheprovider tests/servers/
"""
import collections
import json
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_helpers as h  # noqa: E402
from image_server_data import run  # noqa: E402


def repeat_sampler(n, repeats, world, rank, selected_round):
    """RASampler / RepeatAugSampler's indices for one rank (no shuffle)."""
    num_samples = math.ceil(n * repeats / world)
    total = num_samples * world
    if selected_round:
        selected = math.floor(n // selected_round * selected_round / world)
    else:
        selected = math.ceil(n / world)
    indices = [i for i in range(n) for _ in range(repeats)]
    indices += indices[:total - len(indices)]
    return indices[rank:total:world][:selected]


def serve_ranks(folder, rundir, repeats, world, extra=()):
    d, _ = folder
    runs = []
    for rank in range(world):
        r = run(["-d", os.path.join(d, "train"), "--epochs", "1", "--meta", "-b", "4", "--size", "32", "-r", "0",
                 "--ra-reps", str(repeats), "--world", str(world), "--rank", str(rank), "--ra-round", "0", *extra],
                rundir, exe=h.DIR_EXE)
        assert r.rc == 0, r.err
        runs.append(r)
    return runs


@pytest.mark.parametrize("repeats, world", [(3, 3), (3, 2), (2, 1), (4, 2)])
def test_each_rank_serves_what_the_reference_samplers_give_it(folder, rundir, repeats, world):
    n = 12  # the train split's images
    runs = serve_ranks(folder, rundir, repeats, world)
    served = collections.Counter()
    for rank, r in enumerate(runs):
        expected = repeat_sampler(n, repeats, world, rank, 0)
        assert len(r.keys()) == len(expected), (rank, r.keys())
        served.update(r.keys())
    reference = collections.Counter(i for rank in range(world) for i in repeat_sampler(n, repeats, world, rank, 0))
    assert sorted(served.values()) == sorted(reference.values())


def test_the_repeats_of_a_sample_are_augmented_apart(folder, rundir):
    runs = serve_ranks(folder, rundir, 3, 3)
    by_key = collections.defaultdict(list)
    for r in runs:
        for key, _, image in r.samples():
            by_key[key].append(image)
    assert len(by_key) == 4 and all(len(images) == 3 for images in by_key.values())
    for key, images in by_key.items():
        assert not np.array_equal(images[0], images[1]) and not np.array_equal(images[1], images[2]), key


def test_an_epoch_rounds_as_rasampler_rounds(folder, rundir):
    d, _ = folder
    common = ["-d", os.path.join(d, "train"), "--epochs", "1", "--meta", "-b", "4", "--size", "32", "-r", "0",
              "--ra-reps", "3"]
    r = run(common + ["--ra-round", "4", "--world", "2", "--dataset-samples", "10"], rundir, exe=h.DIR_EXE)
    assert r.rc == 0, r.err
    assert len(r.keys()) == len(repeat_sampler(10, 3, 2, 0, 4)) == 4
    refused = h.run_plain(common + ["zpush+ipc:///tmp/tcs-nothing"], exe=h.DIR_EXE)
    assert refused[0] != 0 and "leave no sample for each of 1 ranks (--ra-round 0 does not round)" in refused[2]


@pytest.mark.parametrize("extra, message", [
    (["--ra-reps", "0"], "--ra-reps 0: expected 1 to 64"),
    (["--dataset-samples", "100"], "--dataset-samples needs --ra-reps"),
    (["--ra-reps", "2", "--val"], "--ra-reps is a training augmentation"),
    (["--ra-reps", "2", "--resample"], "not with --resample"),
    (["--ra-reps", "2"], "--ra-reps over shards needs --dataset-samples N"),
])
def test_repeat_flags_that_cannot_work_are_refused(clean_data, extra, message):
    paths, _ = clean_data
    rc, _, err = h.run_plain(["-u", paths[0], "--epochs", "1"] + extra + ["zpush+ipc:///tmp/tcs-nothing"])
    assert rc != 0 and message in err, err


def test_a_resumed_epoch_serves_the_rest_with_the_recipe_on(folder, rundir):
    d, _ = folder
    recipe = ["-d", os.path.join(d, "train"), "--epochs", "1", "--meta", "-b", "4", "--size", "32", "-r", "0",
              "--seed", "11", "--ra-reps", "2", "--ra-round", "0", "--auto-augment", "ta_wide",
              "--mixup-alpha", "0.2", "--cutmix-alpha", "1.0"]
    full = run(recipe, rundir, exe=h.DIR_EXE)
    assert full.rc == 0, full.err
    assert len(full.batches) == 3  # 12 samples, each twice: an epoch of 12, as the sampler's
    meta = full.metas[0]
    token = {"format": "tensorcom-resume", "version": 1, "epoch": 0,
             "streams": {meta["stream"]: {"fingerprint": meta["fingerprint"], "seed": meta["seed"], "complete": 0,
                                          "epochs": {"0": {"consumed": [[0, 1]]}}}}}
    path = os.path.join(rundir, "token.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(token, f)
    resumed = run(recipe + ["--resume", path], rundir, exe=h.DIR_EXE)
    assert resumed.rc == 0, resumed.err
    assert [m["batch"] for m in resumed.metas] == [1, 2]
    for mine, theirs in zip(resumed.batches, full.batches[1:]):
        assert len(mine) == len(theirs) == 4  # images, labels, mix, meta
        for a, b in zip(mine[:3], theirs[:3]):
            assert np.array_equal(a, b)
