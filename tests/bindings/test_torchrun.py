"""examples/pytorch/train.py data-parallel, two ranks on CPU (gloo): each
rank reads its own server, a signal to one rank stops both at the same step,
the ranks' tokens are merged into one file, and the resumed job trains
exactly the rest of the epoch on every rank.

The ranks start as torchrun starts them, with its environment (RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): Debian's torch 1.13
torchrun fails before starting any worker under Python 3.11 (its
Std.from_str returns None there)."""
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from test_torch import RESUME_BATCH, RESUME_EPOCH, TRAIN, consumed_batches, shard_server, tiny_shards  # noqa: E402

RANKS = 2
SIGNALLED_AT = 1  # steps rank 0 said it did when rank 1 gets SIGUSR1


def train_args(checkpoint, urls, *extra):
    return [sys.executable, TRAIN, "--arch", "resnet18", "--device", "cpu", "--no-amp", "--classes", "10",
            "--report", "1", "--epochs", "1", "--epoch-size", str(RESUME_EPOCH), "--checkpoint", str(checkpoint),
            "--timeout", "60", "--data", "tensorcom:" + " ".join(urls), *extra]


def read_until(proc, pattern, deadline):
    """proc's stdout up to a line matching pattern, read as it comes (no
    buffering that would hold lines back from select); fails past the deadline."""
    text = ""
    while time.monotonic() < deadline:
        if not select.select([proc.stdout], [], [], 0.5)[0]:
            continue
        chunk = os.read(proc.stdout.fileno(), 65536).decode()
        if not chunk:
            break
        text += chunk
        if re.search(pattern, text, re.M):
            return text
    raise AssertionError(f"no line matching {pattern!r}:\n{text}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ranks(args):
    """The ranks, as torchrun --standalone --nproc-per-node RANKS starts them."""
    port = free_port()
    procs = []
    for rank in range(RANKS):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(RANKS), LOCAL_WORLD_SIZE=str(RANKS),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                      text=True, env=env))
    return procs


def finish(procs, deadline):
    """[(returncode, stdout, stderr)] of every rank; kills what outlives the deadline."""
    out = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=max(1, deadline - time.monotonic()))
            out.append((proc.returncode, stdout, stderr))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


class Servers:
    """One serve-imagenet-shards a rank (its share of the shards), pushing to
    the rank's own ipc address."""

    def __init__(self, shards, ipc_dir, tmp_path, name, extra=()):
        self.urls = [f"ipc://{ipc_dir}/{name}-{rank}" for rank in range(RANKS)]
        self.contexts = [shard_server(shards, "zpush+" + url, tmp_path, f"{name}-{rank}",
                                      ("--world", str(RANKS), "--rank", str(rank), *extra))
                         for rank, url in enumerate(self.urls)]

    def __enter__(self):
        for context in self.contexts:
            context.__enter__()
        return ["zpull+" + url for url in self.urls]

    def __exit__(self, *exc):
        for context in self.contexts:
            context.__exit__(*exc)


def test_two_ranks_stop_together_and_resume_the_rest(tmp_path, ipc_dir):
    shards = tiny_shards(str(tmp_path))
    checkpoint = tmp_path / "model.pt"
    token_file = tmp_path / "model.pt.data.json"
    deadline = time.monotonic() + 240
    with Servers(shards, ipc_dir, tmp_path, "first") as urls:
        procs = start_ranks(train_args(checkpoint, urls))
        try:
            seen = read_until(procs[0], rf"epoch 1/1 step {SIGNALLED_AT}/{RESUME_EPOCH} ", deadline)
            procs[1].send_signal(signal.SIGUSR1)
        finally:
            ranks = finish(procs, deadline)
    outs = [seen + ranks[0][1]] + [out for _, out, _ in ranks[1:]]
    everything = "\n".join(outs + [err for _, _, err in ranks])
    assert [code for code, _, _ in ranks] == [128 + signal.SIGUSR1] * RANKS, everything
    stops = [re.findall(r"^train: SIGUSR1: stopped after epoch 0 and (\d+) steps of epoch 1 \(checkpoint saved\); "
                        r"exit status 138$", out, re.M) for out in outs]
    assert all(len(found) == 1 for found in stops) and len({found[0] for found in stops}) == 1, everything
    done = int(stops[0][0])
    assert SIGNALLED_AT <= done < RESUME_EPOCH, everything
    assert all("process group (gloo), DistributedDataParallel" in out for out in outs), everything
    with open(token_file) as f:
        first = json.load(f)
    assert consumed_batches(first) == {f"{rank}/{RANKS}": set(range(done)) for rank in range(RANKS)}
    assert not any(name.startswith("model.pt.data-rank") for name in os.listdir(tmp_path))

    with Servers(shards, ipc_dir, tmp_path, "resumed", ("--resume", str(token_file))) as urls:
        ranks = finish(start_ranks(train_args(checkpoint, urls, "--resume")), time.monotonic() + 240)
    everything = "\n".join(out + err for _, out, err in ranks)
    assert [code for code, _, _ in ranks] == [0] * RANKS, everything
    for _, out, _ in ranks:
        rest = (RESUME_EPOCH - done) * RESUME_BATCH
        assert re.search(rf"^train: epoch 1/1: loss [\d.]+, lr [\d.e-]+, {rest} images in .*"
                         rf"\(steps {done + 1} to {RESUME_EPOCH} of {RESUME_EPOCH}\)$", out, re.M), everything
    with open(token_file) as f:
        final = json.load(f)
    for rank in range(RANKS):
        stream = final["streams"][f"{rank}/{RANKS}"]
        assert stream["complete"] == 1 and stream["epochs"] == {}, final
    state = torch.load(str(checkpoint))
    assert (state["epoch"], state["step"], state["data"]) == (1, 0, final)
