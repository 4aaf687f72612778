#!/usr/bin/env python3
"""How serve-imagenet-shards scales with its worker threads: images/s a
consumer receives with 1, 2, 4, 8 and 14 workers (--workers to change), the
server pinned to as many cores as it has workers, the consumer
(recv-throughput) on a core of its own, and the speed-up over one worker.
Target: 14 workers >= 12x one worker, on a 16-core machine.

    tests/bench/worker_scaling.py --shards 'DIR/r-{000000..000003}.tar' [--build build] [--workers 1,2,4,8,14]

Where the programs run through a launcher (the GPU machine's bundle, see
../shared/device-bundle: `DIR/run BIN ARGS`), pass --run DIR/run; where
they lie in a folder of their own, --bin DIR.
Needs only the Python standard library and taskset. The figure for each
count is the best of --repeat runs, taken in rounds over all the counts.
The server serves forever (the shards' epochs over and over); the consumer
times --batches-per-worker batches for each worker after a warm-up (the
shuffle buffer's fill, the workers' first images), so that every run lasts
about as long whatever the worker count, and a few hundred photos are
enough data (scripts/lab/gpu-pack packs them with the programs for the GPU
machine).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

TARGET_WORKERS, TARGET_SPEEDUP = 14, 12.0


def count_samples(pattern):
    """Samples in the shards: tar members with distinct keys, read with tarfile."""
    import tarfile
    paths = subprocess.run(["bash", "-c", f"printf '%s\\n' {pattern}"], capture_output=True, text=True,
                           check=True).stdout.split()
    keys = set()
    for path in paths:
        try:
            with tarfile.open(path) as tar:
                keys.update((path, m.name.split(".")[0]) for m in tar if m.isfile())
        except (OSError, tarfile.TarError) as e:
            sys.exit(f"cannot read shard {path}: {e}")
    if not keys:
        sys.exit(f"no samples in {pattern}")
    return len(keys)


def program(args, name):
    if args.run:
        return [args.run, name]  # the launcher finds its programs by name
    if args.bin:
        return [os.path.join(args.bin, name)]
    sub = "servers" if name.startswith("serve") else os.path.join("tests", "bench")
    return [os.path.join(args.build, sub, name)]


def cores(first, count):
    return ",".join(str(c) for c in range(first, first + count))


def one_run(args, workers):
    batches = args.batches_per_worker * workers
    warmup = max(4, 2 * workers)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"ipc://{tmp}/s"
        # The consumer on the last core; the server on cores 0..workers-1
        # (its reader and publisher threads share them with the workers).
        consumer_core = os.cpu_count() - 1
        consumer = subprocess.Popen(["taskset", "-c", str(consumer_core)] + program(args, "recv-throughput") +
                                    ["zpull+" + url, "--count", str(batches), "--warmup", str(warmup)],
                                    stdout=subprocess.PIPE, text=True)
        server = subprocess.Popen(["taskset", "-c", cores(0, min(workers + args.spare_cores, consumer_core))] +
                                  program(args, "serve-imagenet-shards") +
                                  ["-u", args.shards, "-b", str(args.batch), "-w", str(workers), "--epochs", "0",
                                   "-r", "0", "--linger", "0", "zpush+" + url],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            out, _ = consumer.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            consumer.kill()
            out = f"no result in --timeout {args.timeout} s"
            consumer.returncode = -1
        finally:
            server.terminate()
            _, errors = server.communicate(timeout=30)
        if consumer.returncode != 0:
            sys.exit(f"consumer failed with {consumer.returncode}: {out}\nserver: {errors}")
        return json.loads(out)["samples_per_s"]


def smt_siblings():
    """Logical CPUs that share CPU 0's core (1 without simultaneous multithreading)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list") as f:
            text = f.read().strip()
    except OSError:
        return 1
    count = 0
    for part in text.split(","):
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", required=True, help="brace pattern of tar shards")
    parser.add_argument("--build", default="build", help="meson build folder")
    parser.add_argument("--bin", help="folder with the programs (instead of --build)")
    parser.add_argument("--run", help="launcher that runs a program given its name (instead of --build)")
    parser.add_argument("--workers", default="1,2,4,8,14", help="worker counts, comma-separated")
    parser.add_argument("--batches-per-worker", type=int, default=100,
                        help="batches timed per worker (100 of 128: a few seconds a run)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--spare-cores", type=int, default=0,
                        help="cores the server has beyond its workers, for its reader and publisher threads")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a run may take")
    args = parser.parse_args()
    try:
        counts = [int(w) for w in args.workers.split(",")]
    except ValueError:
        parser.error(f"--workers takes worker counts separated by commas, not {args.workers!r}")
    if min(counts) < 1 or args.batches_per_worker < 1 or args.batch < 1 or args.repeat < 1:
        parser.error("worker counts, --batches-per-worker, --batch and --repeat must be at least 1")
    if max(counts) >= os.cpu_count():
        print(f"note: {os.cpu_count()} cores: the consumer shares a core with the server above "
              f"{os.cpu_count() - 1} workers", file=sys.stderr)
    if smt_siblings() > 1:
        # Then CPUs 0..n-1 are not n cores: siblings share one core's units.
        print(f"note: {smt_siblings()} logical CPUs a core (SMT): worker counts are logical CPUs, not cores",
              file=sys.stderr)
    samples = count_samples(args.shards)  # also checks that the pattern names shards
    # Rounds over every count, not repeats of one count in a row: the
    # machine's speed drifts, and the ratios compare counts, so each count
    # gets runs spread over the same stretch of time.
    runs = {workers: [] for workers in counts}
    for round_ in range(args.repeat):
        for workers in counts:
            runs[workers].append(one_run(args, workers))
            if args.repeat > 1:
                print(f"round {round_ + 1}: {workers:3d} workers {runs[workers][-1]:10.1f} images/s", flush=True)
    rates = {workers: max(figures) for workers, figures in runs.items()}
    for workers in counts:
        print(f"{workers:3d} workers {rates[workers]:10.1f} images/s  {rates[workers] / rates[counts[0]]:5.2f}x "
              f"{counts[0]} worker{'s' if counts[0] > 1 else ''}", flush=True)
    if TARGET_WORKERS in rates and 1 in rates:
        speedup = rates[TARGET_WORKERS] / rates[1]
        print(f"{TARGET_WORKERS} workers / 1 worker: {speedup:.2f} (target >= {TARGET_SPEEDUP}: "
              f"{'met' if speedup >= TARGET_SPEEDUP else 'NOT met'})")
    print(json.dumps({"cores": os.cpu_count(), "smt": smt_siblings(), "samples": samples, "images_per_s": rates,
                      "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
