#!/usr/bin/python3
"""Network benchmark: many servers on two hosts feeding one trainer host.

Three hosts made of network namespaces on a bridge (veth + bridge, as
tests/network/test_netns_faults.py): server hosts a and b, trainer host t.
For 1, 2 and 4 servers (spread over a and b, one worker each) it measures,
over the same window of one run:
  - each server's own rate, from its rate lines (images handed to ZeroMQ);
  - the trainer's aggregate rate, from tensormon's lines (the C++ receiver:
    it parses every batch but never touches a pixel, so it costs little CPU);
and prints the sum of the servers' rates, the aggregate, and their ratio
(goal >= 0.9). Servers block when the trainer falls behind, which would
lower both sides alike; so each count of servers is first run with every
server feeding a tensormon on its own host ("alone": no bridge, no fan-in),
and the aggregate is also given as a ratio to that sum: on one machine that
ratio also pays for the trainer host's and the bridge's share of the same
cores (and moves with the machine's other users), which separate machines
would not. Each is the best of --repeat runs taken in turns.

Needs root (CAP_NET_ADMIN) and `ip`; exits 77 where namespaces cannot be
made. Addresses are 10.78.0.0/24, inside its own namespaces only; all are
removed at the end.

    tests/bench/netns_throughput.py [--build build] [--shards PATTERN] [--seconds 6] [--repeat 2] [--servers 1,2,4]

Without --shards it makes small synthetic shards with make-shards.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "network"))
import netns_hosts  # noqa: E402

HOSTS = {"a": "10.78.0.1", "b": "10.78.0.2", "t": "10.78.0.3"}
BASE_PORT = 7700
GOAL = 0.9
STARTUP_S = 30  # the longest wait for a first rate line, or for two in a window
SERVER_LINE = re.compile(r": (\d+) batches, (\d+) images;")


class Counted:
    """A process whose stdout lines give a running count of images; keeps (time, count) pairs."""

    def __init__(self, argv, parse):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     text=True)
        self.points = []
        self.errors = []
        self._parse = parse
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            count = self._parse(line)
            if count is not None:
                self.points.append((time.monotonic(), count))

    def _read_errors(self):
        for line in self.proc.stderr:
            self.errors.append(line.rstrip())

    def rate(self, start, end):
        """images/s between the first count at or after start and the last at or before end."""
        inside = [p for p in list(self.points) if start <= p[0] <= end]
        if len(inside) < 2 or inside[-1][0] == inside[0][0]:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    def lines_since(self, start):
        return sum(1 for t, _ in list(self.points) if t >= start)

    def sending_blocked(self):
        """Whether the main thread (a server's publisher) is waiting in poll(): in ZeroMQ's send, for a peer
        with room. Waiting for the next batch is a futex wait instead."""
        try:
            with open(f"/proc/{self.proc.pid}/wchan") as f:
                return "poll" in f.read()
        except OSError:
            return False

    def cpu_seconds(self):
        """User + system seconds so far (`ip netns exec` execs: the pid is the program's own)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def terminate(self):
        if self.proc.poll() is None:
            self.proc.terminate()

    def wait(self):
        """Waits for the process to end, at most 10 s before SIGKILL."""
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def stop_all(servers, receivers):
    """Stops the servers, then their receivers: a server whose only receiver
    has gone waits in ZeroMQ's send with no timeout, and may miss SIGTERM."""
    for group in (servers, receivers):
        for p in group:
            p.terminate()
        for p in group:
            p.wait()


def server_count(line):
    match = SERVER_LINE.search(line)
    return int(match.group(2)) if match else None


def tensormon_count(line):
    try:
        item = json.loads(line)
    except ValueError:
        return None
    if "index" not in item:
        return None
    return item["index"] * item["batch_size"]  # every batch is full: the servers run forever


def placements(count):
    """(host, port) of each server: alternately on a and b."""
    return [("ab"[i % 2], BASE_PORT + i // 2) for i in range(count)]


def start_server(args, hosts, host, port, seed):
    argv = hosts.exec_prefix(host) + [
        f"{args.build}/servers/serve-imagenet-shards", "-u", args.shards, "-w", str(args.workers), "-b",
        str(args.batch), "--size", str(args.size), "--interpolation", args.interpolation, "-r", str(args.report),
        "--epochs", "0", "--seed", str(seed), "--linger", "0", f"zrpush://{HOSTS[host]}:{port}"]
    return Counted(argv, server_count)


def start_tensormon(args, hosts, host, places):
    urls = [f"zrpull://{HOSTS[h]}:{p}" for h, p in places]
    argv = hosts.exec_prefix(host) + [f"{args.build}/tools/tensormon", "--json", "-r", str(args.report), *urls]
    return Counted(argv, tensormon_count)


def wait_until(condition, seconds):
    """Polls condition until it holds or seconds pass."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


def cpu_times():
    """The machine's (busy, idle) jiffies so far, all cores."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields[:8]) - idle, idle


class Window:
    """What measure() saw: the window, CPU seconds and the share of time blocked sending by process, and the
    machine's idle share."""

    def __init__(self, start, end, cpu, blocked, idle):
        self.start, self.end, self.cpu, self.blocked, self.idle = start, end, cpu, blocked, idle


def measure(args, processes):
    """Waits out the warm-up, then the window, sampling who is blocked sending; returns a Window."""
    wait_until(lambda: all(p.points for p in processes), STARTUP_S)
    time.sleep(args.warmup)
    cpu = [p.cpu_seconds() for p in processes]
    busy, idle = cpu_times()
    start = time.monotonic()
    blocked = [0] * len(processes)
    samples = 0
    while time.monotonic() < start + args.seconds:
        blocked = [b + p.sending_blocked() for b, p in zip(blocked, processes)]
        samples += 1
        time.sleep(0.02)
    # A process starved by the machine's other users may need longer to
    # print two lines.
    wait_until(lambda: all(p.lines_since(start) >= 2 for p in processes), STARTUP_S)
    end = time.monotonic()
    cpu = [p.cpu_seconds() - c for p, c in zip(processes, cpu)]
    busy, idle = (now - then for now, then in zip(cpu_times(), (busy, idle)))
    for p in processes:
        if p.proc.poll() is not None:
            sys.exit(f"a process died (status {p.proc.returncode}): {p.proc.args}\n" + "\n".join(p.errors[-5:]))
    return Window(start, end, cpu, [b / max(samples, 1) for b in blocked], idle / max(busy + idle, 1))


def rate_or_die(process, start, end):
    rate = process.rate(start, end)
    if rate is None:
        sys.exit(f"fewer than two rate lines in {STARTUP_S} s from {process.proc.args[4]} in "
                 f"{process.proc.args[3]}: the machine too busy? (try a smaller --batch)")
    return rate


def run_alone(args, hosts, count):
    """Sum of the servers' rates, each feeding a tensormon on its own host."""
    places = placements(count)
    servers = [start_server(args, hosts, h, p, i) for i, (h, p) in enumerate(places)]
    sinks = [start_tensormon(args, hosts, h, [(h, p)]) for h, p in places]
    try:
        w = measure(args, servers + sinks)
        return sum(rate_or_die(s, w.start, w.end) for s in servers)
    finally:
        stop_all(servers, sinks)


def run_fan_in(args, hosts, count):
    """(sum of the servers' rates, the trainer's rate, CPU % of the servers and of the trainer, % of time the
    servers were blocked sending, the machine's idle %), over one window."""
    places = placements(count)
    servers = [start_server(args, hosts, h, p, i) for i, (h, p) in enumerate(places)]
    trainer = start_tensormon(args, hosts, "t", places)
    try:
        w = measure(args, servers + [trainer])
        served = sum(rate_or_die(s, w.start, w.end) for s in servers)
        received = rate_or_die(trainer, w.start, w.end)
        seconds = w.end - w.start
        return (served, received, 100 * sum(w.cpu[:-1]) / seconds, 100 * w.cpu[-1] / seconds,
                100 * sum(w.blocked[:-1]) / count, 100 * w.idle)
    finally:
        stop_all(servers, [trainer])


def synthetic_shards(build, folder, images):
    subprocess.run([f"{build}/tools/make_shards/make-shards", "--synthetic", str(images), "--maxcount", "64",
                    "-o", os.path.join(folder, "synth-%06d.tar")], check=True, capture_output=True, timeout=300)
    count = len([n for n in os.listdir(folder) if n.startswith("synth-")])
    return os.path.join(folder, "synth-{%06d..%06d}.tar" % (0, count - 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--shards", help="brace pattern of tar shards (default: synthetic ones made here)")
    parser.add_argument("--images", type=int, default=512, help="synthetic images to make")
    parser.add_argument("--servers", default="1,2,4", help="counts of servers to run, comma-separated")
    parser.add_argument("--seconds", type=float, default=6.0, help="measuring window per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds before the window")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, in turns; the best is shown")
    parser.add_argument("--workers", type=int, default=1, help="decoding threads per server")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--interpolation", default="bilinear")
    parser.add_argument("--report", type=int, default=1, help="rate line every N batches, servers and trainer")
    args = parser.parse_args()
    counts = [int(c) for c in args.servers.split(",")]
    for exe in ("servers/serve-imagenet-shards", "tools/tensormon", "tools/make_shards/make-shards"):
        if not os.access(os.path.join(args.build, exe), os.X_OK):
            sys.exit(f"{exe} is not built in {args.build}")
    if not netns_hosts.usable():
        print("netns_throughput: skipped: network namespaces cannot be made here (needs root and ip)")
        sys.exit(77)
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        if not args.shards:
            args.shards = synthetic_shards(args.build, tmp, args.images)
        alone = {c: 0.0 for c in counts}
        fan_in = {c: None for c in counts}
        with netns_hosts.NamespaceHosts(HOSTS, prefix="tb") as hosts:
            # In turns, the best of --repeat: others' load comes and goes.
            for _ in range(args.repeat):
                for count in counts:
                    alone[count] = max(alone[count], run_alone(args, hosts, count))
                    run = run_fan_in(args, hosts, count)
                    if fan_in[count] is None or run[1] > fan_in[count][1]:
                        fan_in[count] = run
        rows = [(c, alone[c], *fan_in[c]) for c in counts]
    print(f"network benchmark: servers on hosts a and b (veth + bridge), one trainer (tensormon) on host t; "
          f"{args.workers} worker(s) a server, batches of {args.batch}x{args.size}x{args.size}x3 uint8 "
          f"({args.size * args.size * 3} bytes an image), best of {args.repeat} {args.seconds:g} s windows; "
          f"{os.cpu_count()} cores shared "
          f"by every process; shards {'synthetic' if 'synth-{' in args.shards else args.shards}")
    print(f"  {'servers':>7} {'alone sum':>10} {'served sum':>10} {'trainer':>10} {'ratio':>6} {'vs alone':>8} "
          f"{'MB/s':>7} {'CPU% servers':>12} {'CPU% trainer':>12} {'blocked%':>8} {'idle%':>5}")
    for count, alone, served, received, cpu_servers, cpu_trainer, blocked, idle in rows:
        ratio = received / served
        print(f"  {count:>7} {alone:>10.1f} {served:>10.1f} {received:>10.1f} {ratio:>6.3f} {received / alone:>8.3f} "
              f"{received * args.size * args.size * 3 / 1e6:>7.1f} {cpu_servers:>12.0f} {cpu_trainer:>12.0f} {blocked:>8.0f} {idle:>5.0f}")
    worst = min(r[3] / r[2] for r in rows)
    print(f"  images/s. ratio = trainer / served sum, same window; goal >= {GOAL}: "
          f"{'met' if worst >= GOAL else 'not met'} (worst {worst:.3f}).")
    print("  vs alone = trainer / the servers' sum when each feeds a receiver on its own host (another window).")
    print("  CPU%: of one core, in the window. blocked%: the servers' mean share of the window spent waiting in")
    print("  ZeroMQ's send for the trainer to take a batch (sampled): near 0, the trainer and the network kept up.")
    print("  idle%: the machine's idle CPU (0: the servers were limited by the cores they share with the trainer,")
    print("  the bridge and the machine's other users).")

if __name__ == "__main__":
    main()
