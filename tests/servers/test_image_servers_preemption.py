"""Preemption (docs/deploy.md "Resuming"): a job whose processes
are all killed -9 several times in an epoch, restarted each time from its
last token, consumes every batch of the epoch exactly once and then the
epochs an uninterrupted run would have served; and Connection.iter_epoch()
over servers that serve forever yields one epoch a loop.

The trainer is a small script run as its own process (TRAINER below): it
reads the servers with tensorcom.Connection, logs every batch it consumes
(fsync'd, one file a run) and every few batches writes its state atomically
(temp, fsync, rename): the run, how many batches it had logged, and the
token. Only the batches logged before the state a restart loads count as
consumed; the others were lost with the process and must be served again.

Run: TENSORCOM_BUILD_DIR=build PYTHONPATH=tests:build/bindings pytest-3 -q tests/servers/test_image_servers_preemption.py
"""
import collections
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import msgpack
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_helpers as h  # noqa: E402

# meson's image_servers test puts only tests/ on PYTHONPATH: the package is in the build tree.
BINDINGS_DIR = os.path.join(h.BUILD_DIR, "bindings")
sys.path.insert(0, BINDINGS_DIR)
tensorcom = pytest.importorskip("tensorcom", reason="the Python bindings are not built")

BATCH = 4
SIZE = 16
SHARDS = 4
SAMPLES = 60          # a shard, BAD_EVERY-th of them undecodable
BAD_EVERY = 20
JOB_BATCHES = 28      # --epoch-batches of the killed job's 2 servers (2 shards, 30 batches, each)
FOREVER_BATCHES = 9   # --epoch-batches of the 4 forever servers (1 shard each)
TRAIN_STEP_S = 0.02   # the trainer's work a batch: kills land between batches and in them
TOKEN_EVERY = 3       # batches between the trainer's tokens
WAIT_S = 20           # the longest any one wait of the tests lasts
TIMEOUT_S = 15        # the trainer's Connection timeout


TRAINER = r'''
import json, os, sys, time
import msgpack
import tensorcom

url, state_path, log_path, run, step, every, epochs = sys.argv[1:8]
run, step, every, epochs = int(run), float(step), int(every), int(epochs)
# recv_hwm: the whole run fits in the receive queue. A server that exits
# after --epochs while batches wait in the kernel's socket buffer for a
# receiver whose queue is full loses them (ZeroMQ drops what it had not read
# when the peer closes): tiny batches leave dozens there.
con = tensorcom.Connection(url, timeout=%(timeout)d, recv_hwm=1000)
start = 0
if os.path.exists(state_path):
    with open(state_path, encoding="utf-8") as f:
        token = json.load(f)["token"]
    con.load_state_dict(token)
    start = token["epoch"]
seq = 0


def save():
    tmp = state_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"run": run, "seq": seq, "token": con.state_dict()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, state_path)
    fd = os.open(os.path.dirname(state_path), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


with open(log_path, "a", encoding="utf-8") as log:
    for _ in range(start, epochs):
        for batch in con.iter_epoch():
            meta = msgpack.unpackb(batch[-1].tobytes(), raw=False)
            entry = {k: meta[k] for k in ("stream", "epoch", "batch", "keys", "crops", "flips")}
            log.write(json.dumps(dict(entry, run=run, seq=seq)) + "\n")
            log.flush()
            os.fsync(log.fileno())
            seq += 1
            time.sleep(step)  # the training step
            if seq %% every == 0:
                save()
save()
con.close()
''' % {"timeout": TIMEOUT_S}


@pytest.fixture(scope="module")
def shards(root):
    """SHARDS shards of SAMPLES tiny JPEGs (16..24 px), every BAD_EVERY-th undecodable: a brace pattern."""
    rng = np.random.default_rng(27)
    d = tempfile.mkdtemp(dir=root, prefix="preempt")
    for s in range(SHARDS):
        samples = []
        for i in range(SAMPLES):
            if i % BAD_EVERY == 7:
                data = b"\xff\xd8\xff\xe0" + rng.integers(0, 256, 300, dtype=np.uint8).tobytes()
            else:
                hh, ww = (int(v) for v in rng.integers(16, 25, 2))
                data = h.encode(h.smooth_image(rng, hh, ww), "jpg", quality=90)
            samples.append((f"s{s}/{i:03d}", {"jpg": data, "cls": h.cls(int(rng.integers(0, 10)))}))
        h.write_tar(os.path.join(d, f"p-{s}.tar"), samples)
    return os.path.join(d, "p-{0..%d}.tar" % (SHARDS - 1))


def server_args(pattern, rank, world, epoch_batches, *extra):
    return [h.SHARDS_EXE, "-u", pattern, "--meta", "-b", str(BATCH), "--size", str(SIZE), "--seed", "11",
            "-w", "1", "-r", "0", "--rank", str(rank), "--world", str(world),
            "--epoch-batches", str(epoch_batches), *extra]


def kill_all(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
    for p in procs:
        p.wait(timeout=10)


def read_log(path):
    """The whole lines of a trainer's log (a line cut by the kill is left out)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def read_state(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class Job:
    """Two servers (--rank 0/1 --world 2, --epochs 2) and one trainer on
    ipc sockets in rundir, started as run 0, 1, ...; every process killed
    -9 by kill(), restarted by start() from the trainer's last state."""

    def __init__(self, pattern, rundir, step_s=TRAIN_STEP_S):
        self.pattern = pattern
        self.step_s = step_s
        self.dir = rundir
        self.state = os.path.join(rundir, "state.json")
        self.script = os.path.join(rundir, "trainer.py")
        with open(self.script, "w", encoding="utf-8") as f:
            f.write(TRAINER)
        self.procs = []
        self.servers = []
        self.trainer = None
        self.loaded = []  # the state each run started from (None: none yet)

    def log(self, run):
        return os.path.join(self.dir, f"log-{run}.jsonl")

    def start(self, run):
        state = read_state(self.state)
        self.loaded.append(state)
        resume = []
        if state is not None:
            token = os.path.join(self.dir, f"token-{run}.json")
            with open(token, "w", encoding="utf-8") as f:
                json.dump(state["token"], f)
            resume = ["--resume", token]
        self.servers = []
        for rank in range(2):
            with open(os.path.join(self.dir, f"server-{run}-{rank}.txt"), "wb") as out:
                self.servers.append(subprocess.Popen(
                    server_args(self.pattern, rank, 2, JOB_BATCHES, "--epochs", "2", *resume,
                                f"zrpush+ipc://{self.dir}/s{rank}"),
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [BINDINGS_DIR, os.environ.get("PYTHONPATH")])))
        with open(os.path.join(self.dir, f"trainer-{run}.txt"), "wb") as out:
            self.trainer = subprocess.Popen(
                [sys.executable, self.script, f"zrpull+ipc://{self.dir}/s{{0..1}}", self.state, self.log(run),
                 str(run), str(self.step_s), str(TOKEN_EVERY), "2"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        self.procs = self.servers + [self.trainer]

    def output(self, run):
        parts = []
        for name in [f"trainer-{run}.txt"] + [f"server-{run}-{r}.txt" for r in range(2)]:
            with open(os.path.join(self.dir, name), encoding="utf-8", errors="replace") as f:
                parts.append(f"--- {name}:\n{f.read()[-3000:]}")
        return "\n".join(parts)

    def wait_logged(self, run, count):
        """Waits until run's trainer logged `count` batches."""
        deadline = time.monotonic() + WAIT_S
        while len(read_log(self.log(run))) < count:
            assert self.trainer.poll() is None, f"run {run}: the trainer exited early\n{self.output(run)}"
            assert time.monotonic() < deadline, f"run {run}: {count} batches not consumed in {WAIT_S} s\n" \
                                                f"{self.output(run)}"
            time.sleep(0.005)

    def kill(self):
        kill_all(self.procs)

    def finish(self, run):
        """Waits for run's trainer and servers to end by themselves."""
        try:
            self.trainer.wait(timeout=WAIT_S + TIMEOUT_S)
            for s in self.servers:
                s.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"run {run} did not end\n{self.output(run)}") from None
        assert [p.returncode for p in self.procs] == [0, 0, 0], self.output(run)


def consumed(state):
    """How many batches a trainer's state says were consumed."""
    if state is None:
        return 0
    return sum(b - a for stream in state["token"]["streams"].values() for epoch in stream["epochs"].values()
               for a, b in epoch["consumed"]) + sum(stream["complete"] * JOB_BATCHES
                                                    for stream in state["token"]["streams"].values())


def batches_of(entries):
    """{(stream, epoch, batch): (keys, crops, flips)}, each place once."""
    out = {}
    for e in entries:
        place = (e["stream"], e["epoch"], e["batch"])
        assert place not in out, f"{place} consumed twice"
        out[place] = (e["keys"], e["crops"], e["flips"])
    return out


@pytest.fixture(scope="module")
def reference(shards, root):
    """The uninterrupted job's batches: {(stream, epoch, batch): (keys, crops, flips)}."""
    job = Job(shards, tempfile.mkdtemp(dir=root, prefix="ref"), step_s=0)
    try:
        job.start(0)
        job.finish(0)
    finally:
        job.kill()
    batches = batches_of(read_log(job.log(0)))
    assert sorted(batches) == [(f"{r}/2", e, b) for r in range(2) for e in range(2) for b in range(JOB_BATCHES)]
    return batches


def test_kill_9_of_servers_and_trainer_in_an_epoch_loses_and_repeats_nothing(shards, reference, root):
    rng = random.Random(2027)
    job = Job(shards, tempfile.mkdtemp(dir=root, prefix="kill"))
    # Killed runs: three once the job consumed (before this run, by its
    # token, plus this run's log) a random count of epoch 0's 2 * JOB_BATCHES
    # batches, a random moment later; one at a random moment as it starts.
    # The last run goes to the end of epoch 1.
    points = sorted(rng.sample(range(TOKEN_EVERY + 1, 2 * JOB_BATCHES - 8), 3))
    points.insert(rng.randint(1, 3), None)  # the first restart resumes from a token
    runs = len(points) + 1
    try:
        for run, point in enumerate(points):
            job.start(run)
            if point is None:
                time.sleep(rng.uniform(0.05, 0.5))
            else:
                job.wait_logged(run, max(1, point - consumed(job.loaded[run])))
                time.sleep(rng.uniform(0, 0.05))
            job.kill()
        job.start(runs - 1)
        job.finish(runs - 1)
    finally:
        job.kill()

    logs = [read_log(job.log(run)) for run in range(runs)]
    # What counted: of each killed run, the batches its last state (the one
    # the next run loaded) says it had logged; all of the last run's.
    counted = []
    for run in range(runs):
        after = job.loaded[run + 1] if run + 1 < runs else {"run": run, "seq": len(logs[run])}
        kept = after["seq"] if after is not None and after["run"] == run else 0
        assert [e["seq"] for e in logs[run]] == list(range(len(logs[run])))
        counted += logs[run][:kept]
        if run + 1 < runs:
            assert all(e["epoch"] == 0 for e in logs[run]), f"run {run} was killed after epoch 0"
            assert after is None or after["token"]["epoch"] == 0, after
    assert job.loaded[1] is not None, "the first restart had no token"
    for run in range(1, runs):
        if job.loaded[run] is not None and logs[run]:  # a run killed as it started may have said nothing
            assert "resuming from" in job.output(run), job.output(run)

    # Every batch of both epochs consumed exactly once (batches_of checks
    # "once") with the samples, crops and flips of the uninterrupted run;
    # batches served again after a kill (logged, not counted) too.
    mine = batches_of(counted)
    assert sorted(mine) == sorted(reference)
    for place, batch in mine.items():
        assert batch == reference[place], place
    for e in (e for log in logs for e in log):
        assert (e["keys"], e["crops"], e["flips"]) == reference[(e["stream"], e["epoch"], e["batch"])]
    epoch0 = collections.Counter(k for (_, epoch, _), (keys, _, _) in mine.items() if epoch == 0 for k in keys)
    assert epoch0 == collections.Counter(k for (_, epoch, _), (keys, _, _) in reference.items() if epoch == 0
                                         for k in keys)


def test_iter_epoch_over_four_forever_servers_yields_one_epoch_a_loop(shards, root):
    d = tempfile.mkdtemp(dir=root, prefix="forever")
    servers = []
    try:
        for rank in range(4):
            servers.append(subprocess.Popen(server_args(shards, rank, 4, FOREVER_BATCHES, f"zrpush+ipc://{d}/s{rank}"),
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            stdin=subprocess.DEVNULL))
        with tensorcom.Connection(f"zrpull+ipc://{d}/s{{0..3}}", timeout=WAIT_S) as con:
            for epoch in range(3):
                got = []
                for batch in con.iter_epoch():
                    meta = msgpack.unpackb(batch[-1].tobytes(), raw=False)
                    got.append((meta["stream"], meta["epoch"], meta["batch"]))
                assert len(got) == 4 * FOREVER_BATCHES, got
                assert {e for _, e, _ in got} == {epoch}, got
                assert sorted(got) == [(f"{r}/4", epoch, b) for r in range(4) for b in range(FOREVER_BATCHES)]
        assert all(s.poll() is None for s in servers), "a server serving forever stopped"
    finally:
        kill_all(servers)
