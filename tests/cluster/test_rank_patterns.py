"""Many servers, many trainer ranks: the three patterns of docs/deploy.md,
with real serve-imagenet-shards processes on ipc:// sockets in a temp dir
and stand-in trainer ranks (stand_in_trainer.py, the Python bindings).

Each test asserts what a data-parallel job needs: every sample of an epoch
reaches the ranks exactly once (no sample reaches two ranks), and every
rank gets the same number of batches (DDP hangs otherwise). Sample keys and
batch sequence numbers come from the servers' --meta.
"""
import collections
import time

import pytest

from cluster_helpers import (Processes, assert_exactly_once, batch_counts, bindings_built, make_shards,
                             read_reports, server_args)

if not bindings_built():
    pytest.skip("the Python bindings were not built (the stand-in trainer uses them)", allow_module_level=True)

BATCH = 4


@pytest.fixture
def run(tmp_path):
    processes = Processes(str(tmp_path))
    yield processes
    processes.kill_all()


def url(tmp_path, scheme, index):
    return f"{scheme}+ipc://{tmp_path}/s{index}"


def start_servers(run, tmp_path, shards, world, epoch_batches, epochs=1, scheme="zrpush", extra=()):
    for i in range(world):
        run.start(f"server{i}", server_args(shards, url(tmp_path, scheme, i), i, world, BATCH, epoch_batches,
                                            epochs, extra))


def start_trainers(run, tmp_path, world, urls_of_rank, *options):
    outs = []
    for rank in range(world):
        out = str(tmp_path / f"rank{rank}.json")
        run.trainer(f"rank{rank}", ["--urls", urls_of_rank(rank), "--rank", str(rank), "--world", str(world),
                                    "--out", out, *options])
        outs.append(out)
    return outs


def test_one_server_group_per_rank(tmp_path, run):
    """Trainer rank r connects to its own group of G servers, which serve
    shares r*G .. r*G+G-1 of R*G; --epoch-batches makes the groups equal."""
    shards, keys = make_shards(str(tmp_path), [6] * 8)
    ranks, group = 2, 2
    start_servers(run, tmp_path, shards, ranks * group, epoch_batches=3)
    outs = start_trainers(run, tmp_path, ranks,
                          lambda r: f"zrpull+ipc://{tmp_path}/s{{{r * group}..{r * group + group - 1}}}")
    run.wait_all()
    reports = read_reports(outs)
    assert_exactly_once(reports, keys)
    assert batch_counts(reports) == {0: 6, 1: 6}


def test_rank_and_world_on_both_sides(tmp_path, run):
    """Servers --rank i --world 4; every rank is given all four URLs and
    TensorcomDataset(rank=, world=) picks its share (servers r, r+2). Two
    epochs: each sample once per epoch, the epochs told apart by each
    server's batch sequence (a sample may reach rank 0 in one epoch and
    rank 1 in the next: the shards are dealt anew each epoch)."""
    shards, keys = make_shards(str(tmp_path), [6] * 8)
    start_servers(run, tmp_path, shards, 4, epoch_batches=3, epochs=2)
    outs = start_trainers(run, tmp_path, 2, lambda r: f"zrpull+ipc://{tmp_path}/s{{0..3}}", "--dataset",
                          "--batches", "12")
    run.wait_all()
    reports = read_reports(outs)
    assert batch_counts(reports) == {0: 12, 1: 12}
    assert reports[0]["urls"] == [f"zrpull+ipc://{tmp_path}/s0", f"zrpull+ipc://{tmp_path}/s2"]
    for epoch in (0, 1):
        this_epoch = {rank: {"rank": rank, "batches": [b for b in report["batches"] if b["sequence"] // 3 == epoch]}
                      for rank, report in reports.items()}
        assert_exactly_once(this_epoch, keys)


def uneven_run(tmp_path, run, epoch_batches):
    """Four servers over shards of unequal sizes (shares of 1 to 7 batches)."""
    shards, _ = make_shards(str(tmp_path), [1, 2, 3, 4, 20, 10, 5, 3])
    start_servers(run, tmp_path, shards, 4, epoch_batches=epoch_batches)
    outs = start_trainers(run, tmp_path, 2, lambda r: f"zrpull+ipc://{tmp_path}/s{{0..3}}", "--split")
    run.wait_all()
    return read_reports(outs)


def test_epoch_batches_equalises_uneven_shares(tmp_path, run):
    """Shares of unequal size: cut or read again to exactly 3 batches each,
    so both ranks get 6; a key still reaches one rank only."""
    reports = uneven_run(tmp_path, run, epoch_batches=3)
    assert batch_counts(reports) == {0: 6, 1: 6}
    assert all(len(batch["keys"]) == BATCH for report in reports.values() for batch in report["batches"])
    owners = collections.defaultdict(set)
    for rank, report in reports.items():
        for batch in report["batches"]:
            for key in batch["keys"]:
                owners[key].add(rank)
    assert all(len(ranks) == 1 for ranks in owners.values())
    logs = "".join(run.log(f"server{i}") for i in range(4))
    assert "its first samples were repeated" in logs and "left out this epoch" in logs, logs


def test_uneven_shares_without_epoch_batches_differ(tmp_path, run):
    """The failure --epoch-batches prevents: the same shares, served as they
    are, give the ranks different batch counts."""
    counts = batch_counts(uneven_run(tmp_path, run, epoch_batches=0))
    assert counts[0] != counts[1], counts


def test_pub_to_all_for_evaluation(tmp_path, run):
    """Evaluation: two PUB servers with --subscribers 2; both ranks see every
    sample once, although the second subscribes a second later and reads
    slowly with a queue of one batch (--hwm 1): the servers wait for it
    rather than drop its batches."""
    shards, keys = make_shards(str(tmp_path), [6] * 4)
    start_servers(run, tmp_path, shards, 2, epoch_batches=0, scheme="zpub",
                  extra=("--subscribers", "2", "--hwm", "1"))
    outs = [str(tmp_path / f"rank{r}.json") for r in (0, 1)]
    urls = f"zsub+ipc://{tmp_path}/s{{0..1}}"
    run.trainer("rank0", ["--urls", urls, "--rank", "0", "--world", "2", "--out", outs[0], "--idle", "6"])
    time.sleep(1.0)
    run.trainer("rank1", ["--urls", urls, "--rank", "1", "--world", "2", "--out", outs[1], "--idle", "6",
                          "--delay", "0.1"])
    run.wait_all()
    reports = read_reports(outs)
    for rank, report in reports.items():
        assert_exactly_once({rank: report}, keys)
    assert batch_counts(reports) == {0: 6, 1: 6}
