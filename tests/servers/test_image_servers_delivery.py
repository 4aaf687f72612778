"""Delivery (docs/deploy.md, "Delivery"): with --meta over PUSH every
(epoch, batch) of a server's stream reaches a receiver exactly once, or the
server exits 3 naming what did not; whatever the receiver's lateness, a
stall of the server, a dropped connection, a full queue at exit or a port
under descriptor exhaustion. Servers started alike without --seed make
different streams.

The receivers here are pyzmq PULL sockets that confirm with
tensorcom.receipts (loaded from the source tree), checking the wire
protocol from a second implementation; the C++ receiver's side is
tests/test_delivery.cc. Every wait is bounded.
"""
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time

import msgpack
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_helpers as h  # noqa: E402

BATCH = 4
SIZE = 16
DEADLINE_S = 60


def server(args, url, size=SIZE, **kw):
    return subprocess.Popen([h.SHARDS_EXE, *args, "--meta", "-b", str(BATCH), "--size", str(size), "-r", "0", url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, **kw)


def one_shard(clean_data):
    return ["-u", clean_data[0][0], "--seed", "3"]


class Trainer:
    """A PULL socket that confirms what it takes and logs (epoch, batch)."""

    def __init__(self, ctx, url, bind, heartbeat_ms=0, hwm=1000):
        self.pull = ctx.socket(zmq.PULL)
        self.pull.setsockopt(zmq.LINGER, 0)
        self.pull.setsockopt(zmq.RCVHWM, hwm)
        self.pull.setsockopt(zmq.RECONNECT_IVL, 50)
        if heartbeat_ms:
            self.pull.setsockopt(zmq.HEARTBEAT_IVL, heartbeat_ms)
            self.pull.setsockopt(zmq.HEARTBEAT_TIMEOUT, 4 * heartbeat_ms)
        (self.pull.bind if bind else self.pull.connect)(url)
        self.receipts = h.Receipts(ctx)
        self.taken = []

    def take(self, count=None, idle_s=2.0, pause_s=0.0):
        """Takes batches until `count` are taken or none comes for idle_s."""
        while count is None or len(self.taken) < count:
            if not self.pull.poll(int(idle_s * 1000)):
                return
            frames = self.pull.recv_multipart(copy=False)
            meta = msgpack.unpackb(frames[-1].bytes, raw=False)
            if self.receipts.take(meta, frames[0].get("Peer-Address")):
                self.taken.append((meta["epoch"], meta["batch"]))
            time.sleep(pause_s)

    def close(self):
        self.receipts.close()
        self.pull.close(linger=0)


def close_all(proc, ctx, *trainers):
    """Ends the server if it still runs (continued first, should it be
    stopped), then closes the trainers and the context."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait(timeout=10)
    for trainer in trainers:
        if trainer:
            trainer.close()
    ctx.term()


def finished(proc, timeout=DEADLINE_S):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def assert_exactly_once(taken, batches):
    assert sorted(taken) == sorted(set(taken)), "a batch was taken twice"
    assert len(taken) == batches, f"{len(taken)} of {batches} batches"


def confirmed(out):
    m = re.search(r"delivery: (\d+) of (\d+) batches confirmed by receivers(?:, (\d+) sent again)?", out)
    assert m, out
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def test_a_server_started_before_its_trainer_binds_delivers_every_batch(clean_data, rundir):
    url = f"ipc://{rundir}/d"
    ctx = zmq.Context()
    proc = server(one_shard(clean_data) + ["--epochs", "2"], "zpush+" + url)
    trainer = None
    try:
        time.sleep(2)  # the server is up and has nobody to send to
        trainer = Trainer(ctx, url, bind=True)
        trainer.take()
        rc, out, err = finished(proc)
        assert rc == 0, (out, err)
        assert "waiting up to 120 s for a receiver" in out
        assert_exactly_once(trainer.taken, 10)
        assert confirmed(out)[:2] == (10, 10)
    finally:
        close_all(proc, ctx, trainer)


def test_no_receiver_fails_naming_what_was_not_delivered(clean_data, rundir):
    url = f"zpush+ipc://{rundir}/d"
    proc = server(one_shard(clean_data) + ["--epochs", "1", "--wait-for-receiver", "0", "--delivery-timeout", "1"],
                  url)
    rc, out, err = finished(proc)
    assert rc == 3, (out, err)
    assert "incomplete: sent 20 samples in 5 batches" in out
    assert "5 of 5 batches reached no receiver that confirmed them within 1 s" in err
    assert "epoch/batch: 0/0, 0/1, 0/2, 0/3, 0/4" in err

    proc = server(one_shard(clean_data) + ["--epochs", "1", "--wait-for-receiver", "1"], url)
    rc, out, err = finished(proc)
    assert rc == 1, (out, err)
    assert "no receiver came to" in err and "within 1 s (--wait-for-receiver): nothing was sent" in err


def test_a_stalled_server_whose_connection_was_dropped_sends_again(clean_data):
    """SIGSTOP: the trainer's heartbeats drop the connection meanwhile, and
    ZeroMQ drops the batches queued for it; the server, continued, sends
    them again to the trainer reconnected. Batches of 3 MB: more than the
    sockets' buffers hold wait in the server's queue."""
    ctx = zmq.Context()
    proc = server(one_shard(clean_data) + ["--epochs", "12", "--hwm", "4"], "zrpush+tcp://127.0.0.1:0", size=512)
    trainer = None
    try:
        first = proc.stdout.readline()
        address = re.search(r"\[bound (tcp://[^\]]+)\]", first).group(1)
        trainer = Trainer(ctx, address, bind=False, heartbeat_ms=100, hwm=2)
        trainer.take(count=3, idle_s=10)
        time.sleep(3)  # the server fills every queue on the way, its own too
        proc.send_signal(signal.SIGSTOP)
        try:
            # What the sockets held, then silence: the trainer's heartbeats
            # go unanswered and it drops the connection. (Read meanwhile:
            # libzmq 4.3.4 asserts when a heartbeat times out on a
            # connection whose receive queue is full.)
            trainer.take(idle_s=1.5)
        finally:
            proc.send_signal(signal.SIGCONT)
        trainer.take(idle_s=5)
        rc, out, err = finished(proc)
        assert rc == 0, (out, err)
        assert_exactly_once(trainer.taken, 60)
        taken, sent, again = confirmed(out)
        assert (taken, sent) == (60, 60)
        assert again > 0, "nothing was lost with the connection: the test proves nothing"
    finally:
        close_all(proc, ctx, trainer)


def test_a_receiver_that_goes_with_batches_queued_loses_none(clean_data, rundir):
    """One trainer takes three batches and closes with more queued; the
    next one, bound at the same address, gets the rest, each once."""
    url = f"ipc://{rundir}/d"
    ctx = zmq.Context()
    proc = server(one_shard(clean_data) + ["--epochs", "4"], "zpush+" + url)
    taken = []
    try:
        first = Trainer(ctx, url, bind=True, hwm=1000)
        first.take(count=3, idle_s=10)
        time.sleep(0.5)  # the rest arrives in its queue, to go with it
        taken += first.taken
        first.close()
        second = Trainer(ctx, url, bind=True)
        second.take(idle_s=3)
        taken += second.taken
        second.close()
        rc, out, err = finished(proc)
        assert rc == 0, (out, err)
        assert_exactly_once(taken, 20)
        assert confirmed(out)[2] > 0
    finally:
        close_all(proc, ctx)


def test_exit_with_a_slow_receiver_waits_for_its_receipts(clean_data, rundir):
    """A one-batch receive queue read slowly: the server has sent everything
    long before the trainer takes it, and a short --linger no longer loses
    what is queued."""
    url = f"ipc://{rundir}/d"
    ctx = zmq.Context()
    trainer = Trainer(ctx, url, bind=True, hwm=1)
    proc = server(one_shard(clean_data) + ["--epochs", "2", "--linger", "100"], "zpush+" + url)
    try:
        trainer.take(idle_s=3, pause_s=0.15)
        rc, out, err = finished(proc)
        assert rc == 0, (out, err)
        assert_exactly_once(trainer.taken, 10)
    finally:
        close_all(proc, ctx, trainer)


def finish_a_pull_handshake(connection):
    """What a PULL sends to finish a ZMTP 3.0 NULL handshake; False if the server closed the connection."""
    greeting = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" + bytes(31)
    ready = b"\x05READY" + b"\x0bSocket-Type" + (4).to_bytes(4, "big") + b"PULL"
    try:
        connection.sendall(greeting + bytes([0x04, len(ready)]) + ready)
        return bool(connection.recv(64))
    except (ConnectionError, socket.timeout):
        return False


def test_descriptor_exhaustion_of_the_data_port_loses_nothing(clean_data):
    """Under a 256-descriptor limit, 300 silent PULL peers fill the data
    port; the one trainer that reads gets every batch, once."""
    ctx = zmq.Context()
    both = os.path.join(os.path.dirname(clean_data[0][0]), "clean-{0..1}.tar")
    proc = server(["-u", both, "--seed", "3", "--epochs", "6"], "zrpush+tcp://127.0.0.1:0",
                  preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))
    held = []
    trainer = None
    try:
        address = re.search(r"\[bound (tcp://[^\]]+)\]", proc.stdout.readline()).group(1)
        port = int(address.rsplit(":", 1)[1])
        trainer = Trainer(ctx, address, bind=False, hwm=2)
        trainer.take(count=2, idle_s=10)
        for _ in range(300):
            c = socket.create_connection(("127.0.0.1", port), timeout=2)
            held.append(c)
            finish_a_pull_handshake(c)
            trainer.take(count=len(trainer.taken) + 1, idle_s=0.01)
        trainer.take(idle_s=4)
        for c in held:
            c.close()
        trainer.take(idle_s=2)
        rc, out, err = finished(proc)
        assert rc == 0, (out, err)
        assert_exactly_once(trainer.taken, 60)
    finally:
        for c in held:
            c.close()
        close_all(proc, ctx, trainer)


def test_servers_started_alike_without_a_seed_make_different_streams(clean_data, rundir):
    args = ["-u", clean_data[0][0], "--epochs", "1"]
    runs = [h.run_server(args + ["--meta", "-b", "4", "--size", "16", "-r", "0"], rundir) for _ in range(2)]
    seeds = []
    for r in runs:
        assert r.rc == 0, r
        m = re.search(r": seed (\d+) \(drawn; --seed \1 makes this stream again\)", r.out)
        assert m, r.out
        seeds.append(int(m.group(1)))
        assert {meta["seed"] for meta in r.metas} == {seeds[-1]}
    assert seeds[0] != seeds[1]
    assert [m["keys"] for m in runs[0].metas] != [m["keys"] for m in runs[1].metas]
    again = h.run_server(args + ["--meta", "-b", "4", "--size", "16", "-r", "0", "--seed", str(seeds[0])], rundir)
    assert [m["keys"] for m in again.metas] == [m["keys"] for m in runs[0].metas]
    assert [m["crops"] for m in again.metas] == [m["crops"] for m in runs[0].metas]
    assert "drawn" not in again.out


def test_a_strict_trainer_refuses_one_stream_from_two_servers(clean_data, rundir):
    """Two servers given the same --seed make the same batches: tensormon
    --strict fails naming both instead of taking every batch twice."""
    url = f"ipc://{rundir}/d"
    monitor = subprocess.Popen([os.path.join(h.BUILD_DIR, "tools", "tensormon"), "--strict", "-r", "1", "-t", "20",
                                "--timeout-exit", "zpull+" + url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True)
    servers = [server(one_shard(clean_data) + ["--epochs", "0"], "zpush+" + url) for _ in range(2)]
    try:
        out, err = monitor.communicate(timeout=DEADLINE_S)
        assert monitor.returncode == 1, (out, err)
        m = re.search(r"refusing batches: the same stream '([^']*)' \(fingerprint \w+\) comes from two servers, "
                      r"(\S+ \(run \d+\)) and (\S+ \(run \d+\))", err)
        assert m, err
        assert m.group(2) != m.group(3)
    finally:
        for proc in servers:
            proc.kill()
            proc.communicate(timeout=10)
