#!/usr/bin/python3
"""The wire through a slow network: a server host and a trainer host made of
network namespaces, the server host's link limited with tc (tbf) to each
--rates rate, and for each wire (raw, jpeg, zstd) the images/s a trainer
receives and decodes (recv-throughput, decompress_threads 2).

The servers repeat their first batch (-B, the reference's --benchmark):
encoding happens once, so the link and the receiver are what is measured,
not the servers' CPU (this machine has too few cores to fill a link with
augmentation). Prints each rate's images/s and the ratio to raw (goal for
jpeg: >= 4 x); the receiver's decoding bounds the compressed wires on a
machine of few cores.

Needs root (CAP_NET_ADMIN), `ip` and `tc`; exits 77 where namespaces cannot
be made. Addresses are 10.79.0.0/24, inside its own namespaces only.

    tests/bench/wire_over_links.py --shards 'DIR/photos-000000.tar' [--build build] [--rates 1gbit,10gbit]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "network"))
import netns_hosts  # noqa: E402

HOSTS = {"s": "10.79.0.1", "t": "10.79.0.2"}
PORT = 7790
WIRES = ("raw", "jpeg:95,444", "zstd:1")


def limit(hosts, rate):
    """tbf on the server host's eth0: `rate` out, bursts of 10 ms of it."""
    bits = {"gbit": 1e9, "mbit": 1e6}[rate[-4:]] * float(rate[:-4])
    burst = max(int(bits / 8 / 100), 1 << 20)
    subprocess.run(hosts.exec_prefix("s") + ["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate,
                                             "burst", str(burst), "latency", "100ms"], check=True)


def received(args, hosts, wire, batches):
    """recv-throughput's JSON line for one server sending its first batch over and over."""
    url = f"{HOSTS['s']}:{PORT}"
    server = subprocess.Popen(hosts.exec_prefix("s") + [
        f"{args.build}/servers/serve-imagenet-shards", "-u", args.shards, "-b", "64", "-w", "2", "--size", "224",
        "--seed", "3", "-r", "0", "-B", "--wire", wire, "--linger", "0", f"zrpush://{url}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        out = subprocess.run(hosts.exec_prefix("t") + [
            f"{args.build}/tests/bench/recv-throughput", f"zrpull://{url}", "--count", str(batches), "--warmup", "3",
            "--decompress-threads", "2"], capture_output=True, text=True, timeout=600)
    finally:
        server.terminate()
        server.wait(timeout=30)
    if out.returncode != 0:
        sys.exit(f"receiver failed: {out.stderr}{server.stderr.read()}")
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shards", required=True, help="a photo shard (its first batch is sent)")
    p.add_argument("--build", default="build")
    p.add_argument("--rates", default="1gbit,10gbit")
    p.add_argument("--batches", type=int, default=40)
    args = p.parse_args()
    if not netns_hosts.usable() or not os.access("/usr/sbin/tc", os.X_OK):
        print("wire_over_links: needs root, ip and tc: skipped")
        sys.exit(77)
    with netns_hosts.NamespaceHosts(HOSTS, prefix="tw") as hosts:
        print("224 crops, batches of 64, one server host -> one trainer host (decoding on 2 threads)")
        for rate in args.rates.split(","):
            limit(hosts, rate)
            rates = {}
            for wire in WIRES:
                r = received(args, hosts, wire, args.batches)
                rates[wire] = r["samples_per_s"]
                print(f"{rate:>7}  {wire:<12} {rates[wire]:8.0f} images/s  ({rates[wire] / rates['raw']:.2f} x raw; "
                      f"the receiver busy {r['cpu_seconds'] / r['seconds']:.2f} cores)")


if __name__ == "__main__":
    main()
