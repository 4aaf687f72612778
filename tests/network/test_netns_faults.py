"""Faults across machines, with machines made of Linux network namespaces.

Three "hosts" (namespaces) hang off a bridge that lives in a fourth, so that
nothing changes in the namespace the test runs in: server hosts A and B run
two serve-imagenet-shards each (--rank/--world 4, binding zrpush on their own
address), and the trainer host runs one stand-in trainer (trainer_probe.py,
the Python Connection) that connects to all four. The test then takes host
A's link down for 3 s and up again, and kill -9s one server on A and starts
it again on the same port. The trainer must keep receiving from the others
throughout, resume from A and from the restarted server without being
restarted itself, and nothing may hang. Every assertion is on counts of
batches by server, from the batches' --meta.

Needs root (CAP_NET_ADMIN) and `ip`; skips (exit 77) where namespaces
cannot be made. Addresses are in 10.77.0.0/24, inside the test's own
namespaces only (made by netns_hosts.py); all are removed at the end.

    TENSORCOM_BUILD_DIR   the meson build dir (servers/, bindings/)
"""
import json
import os
import queue
import subprocess
import sys
import tarfile
import io
import threading
import time

import cv2
import numpy as np
import pytest

import netns_hosts

BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
SHARDS_EXE = os.path.join(BUILD_DIR, "servers", "serve-imagenet-shards")
BINDINGS = os.path.join(BUILD_DIR, "bindings")
PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainer_probe.py")
HOSTS = {"a": "10.77.0.1", "b": "10.77.0.2", "t": "10.77.0.3"}
PORTS = (7600, 7601)

if not netns_hosts.usable():
    pytest.skip("network namespaces cannot be made here (needs root and ip)", allow_module_level=True)
if not os.path.isdir(os.path.join(BINDINGS, "tensorcom")):
    pytest.skip("the Python bindings were not built (the trainer uses them)", allow_module_level=True)


@pytest.fixture(scope="module")
def network():
    """The bridge namespace and three hosts, each with eth0 on the bridge."""
    with netns_hosts.NamespaceHosts(HOSTS) as hosts:
        yield hosts


def smooth_jpeg(rng, size=48):
    y, x = np.mgrid[0:size, 0:size]
    image = np.stack([(x * 5 + rng.integers(0, 255)) % 256, (y * 3) % 256, (x + y) % 256], -1).astype(np.uint8)
    ok, data = cv2.imencode(".jpg", image)
    assert ok
    return data.tobytes()


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Four shards of 16 small JPEGs: one per server rank."""
    d = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(5)
    paths = []
    for s in range(4):
        path = d / f"net-{s}.tar"
        with tarfile.open(path, "w") as tar:
            for i in range(16):
                for ext, data in (("jpg", smooth_jpeg(rng)), ("cls", str(s).encode())):
                    info = tarfile.TarInfo(f"s{s}_{i:02d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        paths.append(str(path))
    return paths


class Server:
    """One serve-imagenet-shards in a host namespace, serving forever."""

    def __init__(self, hosts, host, port, rank, shards, logdir):
        self.hosts, self.host, self.port, self.rank, self.shards, self.logdir = hosts, host, port, rank, shards, logdir
        self.proc = None
        self.start()

    def start(self):
        pattern = "{" + ",".join(self.shards) + "}"
        args = self.hosts.exec_prefix(self.host) + [SHARDS_EXE, "-u", pattern, "--rank", str(self.rank),
                "--world", "4", "-b", "4", "--size", "32", "-w", "1", "-r", "0", "--meta", "--shuffle", "0",
                "--hwm", "2", "--linger", "0", f"zrpush://{HOSTS[self.host]}:{self.port}"]
        log = open(os.path.join(self.logdir, f"server-{self.host}{self.port}.log"), "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Trainer:
    """trainer_probe.py in the trainer namespace; its lines arrive on a queue."""

    def __init__(self, hosts, urls):
        env = dict(os.environ, PYTHONPATH=BINDINGS, PYTHONDONTWRITEBYTECODE="1")
        self.proc = subprocess.Popen(hosts.exec_prefix("t") + [sys.executable, PROBE, *urls],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     env=env)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def collect(self, seconds):
        """Batches by server id over the next `seconds`."""
        counts = {}
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                item = self.lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                continue
            if "server" in item:
                counts[item["server"]] = counts.get(item["server"], 0) + 1
        assert self.proc.poll() is None, f"the trainer died: {self.proc.stderr.read().decode(errors='replace')}"
        return counts

    def collect_until_heard(self, servers, pids, seconds):
        """Batches by host until every one of servers (host+port names) has
        been heard, or `seconds` passed: a trainer and servers starting on a
        loaded machine take seconds to import, bind and connect."""
        heard = {}
        end = time.monotonic() + seconds
        while time.monotonic() < end and not set(servers) <= set(heard):
            for host, n in by_host(self.collect(0.5), pids()).items():
                heard[host] = heard.get(host, 0) + n
        return heard

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def by_host(counts, pids):
    """Sums counts by host letter, from server ids hostname:pid."""
    out = {}
    for server, n in counts.items():
        host = pids.get(int(server.rsplit(":", 1)[1]), "?")
        out[host] = out.get(host, 0) + n
    return out


def test_trainer_rides_through_a_link_outage_and_a_server_restart(network, shards, tmp_path):
    servers = [Server(network, h, p, r, shards, str(tmp_path)) for r, (h, p) in enumerate(
        [("a", PORTS[0]), ("a", PORTS[1]), ("b", PORTS[0]), ("b", PORTS[1])])]
    urls = [f"zrpull://{HOSTS[h]}:{PORTS[0]}" for h in "ab"] + [f"zrpull://{HOSTS[h]}:{PORTS[1]}" for h in "ab"]
    trainer = Trainer(network, urls)
    try:
        def pids():
            # ip netns exec execs the server: the pid is the server's own.
            return {s.proc.pid: s.host + str(s.port) for s in servers}

        # 1. Every server feeds the trainer.
        everyone = {"a7600", "a7601", "b7600", "b7601"}
        hosts = trainer.collect_until_heard(everyone, pids, 30.0)
        assert set(hosts) == everyone, hosts

        # 2. Host A's link goes down: B keeps the trainer fed.
        network.set_link("a", up=False)
        # What A had already delivered into the trainer's socket buffers is
        # drained first: small batches fill them by the hundred, and on a
        # loaded machine the trainer takes seconds to read them.
        for _ in range(20):
            drained = by_host(trainer.collect(0.5), pids())
            if drained.get("a7600", 0) + drained.get("a7601", 0) == 0:
                break
        during = by_host(trainer.collect(2.5), pids())
        print("during outage", during)
        network.set_link("a", up=True)
        assert during.get("b7600", 0) > 0 and during.get("b7601", 0) > 0, during
        assert during.get("a7600", 0) + during.get("a7601", 0) <= 4, during  # no more than buffered

        # 3. Link back: A resumes, without restarting anything.
        after = trainer.collect_until_heard({"a7600", "a7601"}, pids, 20.0)
        assert after.get("a7600", 0) > 0 and after.get("a7601", 0) > 0, after

        # 4. kill -9 one server of A; the others go on; restarted, it is heard again.
        victim = servers[0]
        old_pid = victim.proc.pid
        victim.kill()
        without = trainer.collect_until_heard({"a7601", "b7600"}, pids, 10.0)
        assert without.get("a7601", 0) > 0 and without.get("b7600", 0) > 0, without
        victim.start()
        assert victim.proc.pid != old_pid
        back = trainer.collect_until_heard(everyone, pids, 20.0)
        print("after restart", back)
        assert back.get("a7600", 0) > 0, back  # the new process, on the same port
        assert all(back.get(k, 0) > 0 for k in ("a7601", "b7600", "b7601")), back
        assert trainer.proc.poll() is None
    finally:
        trainer.stop()
        for s in servers:
            s.kill()
