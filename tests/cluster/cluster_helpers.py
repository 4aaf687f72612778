"""Helpers of the many-servers, many-ranks tests: small shards whose sample
keys say where each sample came from, servers started and always stopped,
and the stand-in trainer's reports read back and checked.

    TENSORCOM_BUILD_DIR   the meson build dir (servers/, bindings/)
"""
import collections
import io
import json
import os
import subprocess
import sys
import tarfile

import cv2
import numpy as np

BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
SHARDS_EXE = os.path.join(BUILD_DIR, "servers", "serve-imagenet-shards")
BINDINGS = os.path.join(BUILD_DIR, "bindings")
HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER = os.path.join(HERE, "stand_in_trainer.py")
RUN_DEADLINE_S = 60  # one server or trainer run, at most


def bindings_built():
    return os.path.isdir(os.path.join(BINDINGS, "tensorcom"))


def small_jpeg(rng, size=24):
    image = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
    ok, data = cv2.imencode(".jpg", cv2.GaussianBlur(image, (5, 5), 0))
    assert ok
    return data.tobytes()


def make_shards(directory, sizes, seed=3):
    """One shard per entry of sizes, holding that many samples keyed
    s{shard}_{index}. Returns (shard paths, every key)."""
    rng = np.random.default_rng(seed)
    paths, keys = [], []
    for s, size in enumerate(sizes):
        path = os.path.join(directory, f"shard-{s:02d}.tar")
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for i in range(size):
                key = f"s{s:02d}_{i:03d}"
                for ext, data in (("jpg", small_jpeg(rng)), ("cls", str(s).encode())):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                keys.append(key)
        paths.append(path)
    return paths, keys


def brace(paths):
    """A brace pattern naming exactly these paths."""
    return "{" + ",".join(paths) + "}" if len(paths) > 1 else paths[0]


def server_args(shards, url, rank, world, batch, epoch_batches=0, epochs=1, extra=()):
    return [SHARDS_EXE, "-u", brace(shards), "--rank", str(rank), "--world", str(world), "-b", str(batch),
            "--epochs", str(epochs), "--epoch-batches", str(epoch_batches), "--size", "16", "-w", "1", "-r", "0",
            "--meta", "--shuffle", "8", "--linger", "5000", *extra, url]


class Processes:
    """Processes started for one test; all killed and reaped at the end."""

    def __init__(self, logdir):
        self.logdir = logdir
        self.procs = []

    def start(self, name, args, env=None):
        log = open(os.path.join(self.logdir, f"{name}.log"), "wb")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        log.close()
        self.procs.append((name, proc))
        return proc

    def trainer(self, name, args):
        env = dict(os.environ, PYTHONPATH=BINDINGS, PYTHONDONTWRITEBYTECODE="1")
        return self.start(name, [sys.executable, TRAINER, *args], env)

    def wait_all(self, timeout=RUN_DEADLINE_S):
        """Waits for every process; fails naming the ones that failed, with their logs."""
        failed = []
        for name, proc in self.procs:
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                code = "timed out"
            if code != 0:
                failed.append(f"{name} ({code}):\n{self.log(name)}")
        assert not failed, "\n".join(failed)

    def log(self, name):
        with open(os.path.join(self.logdir, f"{name}.log"), errors="replace") as f:
            return f.read()[-3000:]

    def kill_all(self):
        for _, proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


def read_reports(paths):
    """The stand-in trainers' reports, by rank."""
    reports = {}
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        reports[report["rank"]] = report
    return reports


def keys_of(report):
    return [key for batch in report["batches"] for key in batch["keys"]]


def assert_exactly_once(reports, all_keys, times=1):
    """Every key reached the ranks `times` times in all, and no key reached
    two ranks (within an epoch: the shards are dealt to the servers anew
    each epoch, as DistributedSampler reshuffles with set_epoch)."""
    counts = collections.Counter(key for report in reports.values() for key in keys_of(report))
    wrong = {key: counts.get(key, 0) for key in set(all_keys) | set(counts) if counts.get(key, 0) != times}
    assert not wrong, f"keys not received exactly {times} times: {dict(sorted(wrong.items())[:10])}"
    owners = collections.defaultdict(set)
    for rank, report in reports.items():
        for key in keys_of(report):
            owners[key].add(rank)
    shared = {key: sorted(ranks) for key, ranks in owners.items() if len(ranks) > 1}
    assert not shared, f"keys that reached several ranks: {dict(list(shared.items())[:10])}"


def batch_counts(reports):
    return {rank: len(report["batches"]) for rank, report in reports.items()}
