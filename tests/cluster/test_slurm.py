"""The examples/slurm jobs on a real, one-machine Slurm cluster.

The test writes its own munge key and slurm.conf in a temp dir, starts
munged, slurmctld and three slurmd (nodes tc1, tc2, tc3 on this machine at
127.0.0.1, .2 and .3: Debian's slurmd runs several per host, each on its
own port) as root, on ports found free, and submits with sbatch --wait:

- one-node.sbatch: 2 servers and 2 stand-in trainer ranks in one allocation;
- hetjob.sbatch: 2 server nodes x 2 servers (ports TC_PORT.. on each node's
  address), and a trainer node with 2 ranks connecting to
  zrpull://{127.0.0.1,127.0.0.2}:{P..P+1} and keeping their share.

Both use --epoch-batches and --epochs 1; the job stops the servers once the
trainers end. Asserted: every sample of the epoch reached the
ranks exactly once, both ranks got the same number of batches.

- requeue.sbatch, and hetjob.sbatch with one server a server node: 2
  servers and 2 resumable stand-in ranks (--token); once
  each rank has a few batches the test sends the batch shell USR1 (as
  --signal=B:USR1@N would), the script passes it on, the ranks write their
  tokens and stop, the script requeues the job; run again, it merges the
  tokens and resumes the servers. Asserted: the batches consumed before the
  token (part 1) and the batches of part 2 are every batch of the epoch
  once, and their samples (keys from --meta) every sample once.

Everything started is killed and the temp dir removed at the end; every
wait is bounded. Skipped (exit 77) without root or the daemons.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from cluster_helpers import (BINDINGS, SHARDS_EXE, TRAINER, assert_exactly_once, batch_counts, bindings_built,
                             brace, keys_of, make_shards, read_reports)

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "slurm")
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "srun", "scancel")
NODES = {"tc1": "127.0.0.1", "tc2": "127.0.0.2", "tc3": "127.0.0.3"}
START_S = 30   # the cluster up, at most
JOB_S = 60     # one job, at most
BATCH = 4
CRED_EXPIRE_S = 10  # step credentials' lifetime, and the wait before a requeued job starts again


def missing():
    if os.geteuid() != 0:
        return "not root: slurmd must run as root"
    absent = [name for name in DAEMONS if shutil.which(name) is None]
    if absent:
        return f"no {', '.join(absent)} (Debian's slurm-wlm and munge)"
    if not bindings_built():
        return "the Python bindings were not built (the stand-in trainer uses them)"
    return None


if missing():
    pytest.skip(missing(), allow_module_level=True)


def free_ports(count, host="127.0.0.1"):
    """`count` consecutive ports free on host (and on the other node addresses)."""
    for _ in range(50):
        probe = socket.socket()
        probe.bind((host, 0))
        base = probe.getsockname()[1]
        probe.close()
        if base + count > 65535:
            continue
        if all(port_free(address, base + i) for address in NODES.values() for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


def port_free(address, port):
    with socket.socket() as s:
        try:
            s.bind((address, port))
            return True
        except OSError:
            return False


def slurm_conf(d, ports):
    names = {"conf": f"{d}/slurm.conf", "state": f"{d}/state", "log": f"{d}/log"}
    lines = [
        "ClusterName=tensorcom-test",
        f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
        f"SlurmctldPort={ports['ctld']}",
        "SlurmUser=root", "SlurmdUser=root",
        # cred_expire: also how long a requeued job waits before it starts again (default 120 s).
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={d}/munge/socket,cred_expire={CRED_EXPIRE_S}",
        f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none", "MpiDefault=none",
        "MailProg=/bin/true",
        # Backfill every second: heterogeneous jobs are placed by it.
        "SchedulerType=sched/backfill", "SchedulerParameters=bf_interval=1",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
        # Nodes declared bigger than this machine: slurmd accepts them so.
        "SlurmdParameters=config_overrides",
        "ReturnToService=2", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=2", "MinJobAge=2",
    ]
    for (name, address), port in zip(NODES.items(), ports["slurmd"]):
        lines.append(f"NodeName={name} NodeHostname={socket.gethostname()} NodeAddr={address} Port={port} "
                     "CPUs=4 State=UNKNOWN")
    lines.append(f"PartitionName=test Nodes={','.join(NODES)} Default=YES MaxTime=5 State=UP")
    with open(names["conf"], "w") as f:
        f.write("\n".join(lines) + "\n")
    return names["conf"]


class Cluster:
    """munged, slurmctld and the slurmds, in the foreground, as children."""

    def __init__(self, directory):
        self.d = directory
        self.procs = []
        for sub in ("munge", "state", "log", "spool"):
            os.makedirs(os.path.join(directory, sub), mode=0o700)
        ports = {"ctld": free_ports(1), "slurmd": [free_ports(1) for _ in NODES]}
        self.conf = slurm_conf(directory, ports)
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def start(self):
        d = self.d
        with open(f"{d}/munge/key", "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(f"{d}/munge/key", 0o600)
        self.spawn("munged", ["munged", "-F", "-f", f"--key-file={d}/munge/key", f"--socket={d}/munge/socket",
                              f"--pid-file={d}/munge/pid", f"--log-file={d}/log/munged.log",
                              f"--seed-file={d}/munge/seed"])
        self.wait_for(lambda: os.path.exists(f"{d}/munge/socket"), "munged's socket")
        self.spawn("slurmctld", ["slurmctld", "-D", "-i"])
        for name in NODES:
            self.spawn(f"slurmd-{name}", ["slurmd", "-D", "-N", name])
        self.wait_for(self.nodes_idle, "the nodes to be idle")

    def spawn(self, name, args):
        log = open(os.path.join(self.d, "log", f"{name}.out"), "wb")
        self.procs.append(subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL))
        log.close()

    def nodes_idle(self):
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], check=False).stdout.split()
        return out[1::2] == ["idle"] * len(NODES)

    def wait_for(self, ready, what):
        deadline = time.monotonic() + START_S
        while not ready():
            for proc in self.procs:
                assert proc.poll() is None, f"{proc.args[0]} exited ({proc.returncode}) waiting for {what}:\n" \
                    + self.logs()
            assert time.monotonic() < deadline, f"no {what} after {START_S} s:\n" + self.logs()
            time.sleep(0.2)

    def run(self, args, check=True, timeout=20, env=None):
        return subprocess.run(args, env=env or self.env, capture_output=True, text=True, check=check,
                              timeout=timeout)

    def logs(self):
        out = []
        for name in sorted(os.listdir(os.path.join(self.d, "log"))):
            with open(os.path.join(self.d, "log", name), errors="replace") as f:
                out.append(f"--- {name}\n{f.read()[-2000:]}")
        return "\n".join(out)

    def stop(self):
        self.run(["scancel", "--user=root"], check=False)
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster():
    directory = tempfile.mkdtemp(prefix="tensorcom-slurm-")
    try:
        c = Cluster(directory)
        try:
            c.start()
            yield c
        finally:
            c.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def job_env(cluster, out_dir, parameters, trainer=None):
    trainer = trainer or (f"{sys.executable} {TRAINER} --urls \"$TC_URLS\" --split --batches \"$TC_RANK_BATCHES\" "
                          f"--out {out_dir}/rank-$RANK.json")
    return dict(cluster.env, PYTHONPATH=BINDINGS, PYTHONDONTWRITEBYTECODE="1", TC_SERVER=SHARDS_EXE,
                TC_SLURM_DIR=EXAMPLES, TC_TRAINER=trainer, TC_BATCH=str(BATCH), TC_STOP_WAIT="10",
                # One epoch a server: a rank that takes its batches from several servers
                # mixes their epochs when one runs ahead (docs/deploy.md).
                TC_EPOCHS="1",
                TC_SERVER_ARGS="--size 16 -w 1 -r 0 --meta --shuffle 8", **parameters)


def submit(cluster, script, parameters, out_dir):
    """sbatch --wait of an example with TC_* parameters; its reports by rank."""
    env = job_env(cluster, out_dir, parameters)
    output = os.path.join(out_dir, "job.out")
    done = cluster.run(["sbatch", "--wait", f"--output={output}", f"--chdir={out_dir}", "--time=2",
                        os.path.join(EXAMPLES, script)], check=False, timeout=JOB_S, env=env)
    with open(output, errors="replace") if os.path.exists(output) else open(os.devnull) as f:
        job_output = f.read()
    assert done.returncode == 0, f"{script}: sbatch {done.returncode}\n{done.stderr}\n{job_output}\n" + cluster.logs()
    reports = [os.path.join(out_dir, name) for name in os.listdir(out_dir) if name.startswith("rank-")]
    return read_reports(reports), job_output


def assert_epoch_served(reports, keys, output):
    """Equal batch counts, every key exactly once; on failure, with the job's output."""
    try:
        assert batch_counts(reports) == {0: 6, 1: 6}
        assert_exactly_once(reports, keys)
    except AssertionError as e:
        raise AssertionError(f"{e}\njob output:\n{output}") from None


@pytest.fixture
def shards(tmp_path):
    return make_shards(str(tmp_path), [6] * 8)


def test_one_node(cluster, shards, tmp_path):
    paths, keys = shards
    port = free_ports(2)
    reports, output = submit(cluster, "one-node.sbatch", {
        "TC_SHARDS": brace(paths), "TC_SERVERS_PER_NODE": "2", "TC_RANKS_PER_NODE": "2", "TC_PORT": str(port),
        "TC_EPOCH_BATCHES": "6"}, str(tmp_path))
    assert_epoch_served(reports, keys, output)


def test_hetjob(cluster, shards, tmp_path):
    paths, keys = shards
    port = free_ports(2)
    reports, output = submit(cluster, "hetjob.sbatch", {
        "TC_SHARDS": brace(paths), "TC_SERVERS_PER_NODE": "2", "TC_RANKS_PER_NODE": "2", "TC_PORT": str(port),
        "TC_EPOCH_BATCHES": "3", "TC_BIND_HOST": "node"}, str(tmp_path))
    assert_epoch_served(reports, keys, output)
    servers = {batch["server"] for report in reports.values() for batch in report["batches"]}
    assert len(servers) == 4, servers
    assert "zrpull://{127.0.0." in output, output  # two server nodes, named by their addresses


REQUEUE_S = 120  # the requeue test: both runs of the job, at most
RANK_EPOCH = 6   # batches of one server (and so of one rank) an epoch


def read_text(path):
    if not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return f.read()


def wait_until(ready, what, timeout, output):
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"no {what} after {timeout} s; job output:\n{read_text(output)}"
        time.sleep(0.2)


def job_state(cluster, job):
    """(state, restarts) of a job; None once Slurm forgot it (MinJobAge after it ended)."""
    r = cluster.run(["scontrol", "-o", "show", "job", job], check=False)
    if r.returncode != 0:
        return None
    fields = dict(f.split("=", 1) for f in r.stdout.split() if "=" in f)
    return fields.get("JobState"), int(fields.get("Restarts", "0"))


def batches_by_stream(report):
    out = {}
    for batch in report["batches"]:
        assert batch["epoch"] == 0, batch
        out.setdefault(batch["stream"], []).append(batch["batch"])
    return out


# hetjob.sbatch: one server on each of its two server nodes, so that each
# rank reads one server as with requeue.sbatch.
@pytest.mark.parametrize("script, layout", [
    ("requeue.sbatch", {"TC_SERVERS_PER_NODE": "2"}),
    ("hetjob.sbatch", {"TC_SERVERS_PER_NODE": "1", "TC_BIND_HOST": "node"}),
])
def test_requeue_mid_epoch_resumes_exactly_the_rest(cluster, shards, tmp_path, script, layout):
    paths, keys = shards
    out_dir, checkpoint = str(tmp_path), str(tmp_path / "checkpoint")
    port = free_ports(2)
    # Part 1 writes part0-rank*.json, the requeued run part1-rank*.json.
    trainer = (f"{sys.executable} {TRAINER} --urls \"$TC_URLS\" --split --delay 0.5 "
               f"--token {checkpoint}/stand-in.data-rank$RANK.json "
               f"--out {out_dir}/part${{SLURM_RESTART_COUNT:-0}}-rank$RANK.json")
    env = job_env(cluster, out_dir, {
        "TC_SHARDS": brace(paths), "TC_RANKS_PER_NODE": "2", "TC_PORT": str(port),
        "TC_EPOCH_BATCHES": str(RANK_EPOCH), "TC_CHECKPOINT": checkpoint, "TC_PYTHON": sys.executable,
        "TC_CHECKPOINT_WAIT": "20", **layout}, trainer)
    output = os.path.join(out_dir, "job.out")
    # The warning signal is sent by hand below. The script's own
    # --signal=B:USR1@180 would, with the partition's 5-minute limit, come
    # at once in every run and requeue the job again whenever a run is slower
    # than Slurm's first signal check (a loaded machine): 10 s before the limit.
    job = cluster.run(["sbatch", "--parsable", f"--output={output}", f"--chdir={out_dir}", "--time=5",
                       "--signal=B:USR1@10", os.path.join(EXAMPLES, script)],
                      env=env).stdout.strip().split(";")[0]
    try:
        # Mid-epoch: each rank has 2 of its 6 batches (0.5 s each).
        wait_until(lambda: all(f"stand-in trainer rank {r}: batch 2\n" in read_text(output) for r in (0, 1)),
                   "second batch on both ranks", JOB_S, output)
        cluster.run(["scancel", "--batch", "--signal=USR1", job])  # what --signal=B:USR1@N sends
        wait_until(lambda: (job_state(cluster, job) or ("", 0))[1] >= 1, "requeue", JOB_S, output)
        # The requeued job starts again once the credentials of its first run
        # expired (CRED_EXPIRE_S; moving its start time earlier gets it killed).
        wait_until(lambda: job_state(cluster, job) is None or job_state(cluster, job)[0] in ("COMPLETED", "FAILED",
                                                                                               "CANCELLED", "TIMEOUT"),
                   "the requeued job to end", REQUEUE_S, output)
    finally:
        cluster.run(["scancel", job], check=False)
    text = read_text(output)
    try:
        assert "requeueing job" in text and "servers resume from" in text
        parts = [read_reports([os.path.join(out_dir, f"part{p}-rank{r}.json") for r in (0, 1)]) for p in (0, 1)]
        with open(os.path.join(checkpoint, "servers-token.json")) as f:
            resumed_from = json.load(f)
        streams = set()
        for rank in (0, 1):
            before, after = batches_by_stream(parts[0][rank]), batches_by_stream(parts[1][rank])
            assert before.keys() == after.keys() and len(before) == 1, (before, after)  # one server a rank
            stream = next(iter(before))
            streams.add(stream)
            assert 0 < len(before[stream]) < RANK_EPOCH, "the signal came mid-epoch"
            # Part 1's batches are what the servers' token lists as consumed; part 2 is the rest, once.
            consumed = resumed_from["streams"][stream]["epochs"]["0"]["consumed"]
            assert sorted(before[stream]) == [i for a, b in consumed for i in range(a, b)]
            assert sorted(before[stream] + after[stream]) == list(range(RANK_EPOCH))
        assert streams == {"0/2", "1/2"}
        assert_exactly_once({(p, r): parts[p][r] for p in (0, 1) for r in (0, 1)}, keys)
        assert sum(len(keys_of(parts[p][r])) for p in (0, 1) for r in (0, 1)) == len(keys)
    except (AssertionError, OSError, KeyError) as e:
        raise AssertionError(f"{e!r}\njob output:\n{text}\n{cluster.logs()}") from None
