#!/usr/bin/python3
"""Reduced-resolution shards and progressive resizing: server images/s per
core on shards stored at a smaller maximum side, at the output sizes of a
progressive-resizing recipe, against 224 on the full-resolution
restart-marker shards (what the servers serve without either).

For each --max-sides N, `make-shards --from-shards --max-side N
--restart-markers` makes the reduced shards (its cost is printed: photos/s,
bytes in and out); the full-resolution reference is the same photos with
restart markers only. Each (shards, size) pair is served by one worker
pinned to core 0 to a consumer on core 1 (augment_throughput.py's method);
each figure is the best of --repeat. The goal: 160 on max-side-320
shards at >= 3x the reference.

    tests/bench/reduced_resolution.py --shards 'DIR/photos-{000000..000003}.tar' [--build build]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from augment_throughput import count_images, server, shard_paths  # noqa: E402

GOAL = ("160 on max-side 320", 3.0)


def make_shards(build, pattern, folder, prefix, max_side=None):
    """Re-packs pattern's photos into folder (restart markers, optionally
    --max-side); returns (pattern, seconds, bytes in, bytes out)."""
    args = [f"{build}/tools/make_shards/make-shards", "--from-shards", pattern, "--restart-markers", "--maxcount",
            "500", "-o", os.path.join(folder, prefix + "-%06d.tar")]
    if max_side:
        args += ["--max-side", str(max_side)]
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"make-shards failed: {done.stderr.strip()}")
    names = sorted(n for n in os.listdir(folder) if n.startswith(prefix + "-"))
    out_bytes = sum(os.path.getsize(os.path.join(folder, n)) for n in names)
    return os.path.join(folder, prefix + "-{%06d..%06d}.tar" % (0, len(names) - 1)), seconds, out_bytes, done.stdout


def best(repeat, measure):
    return max(measure() for _ in range(repeat))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shards", required=True, help="brace pattern of photo shards")
    p.add_argument("--build", default="build")
    p.add_argument("--max-sides", default="256,320,512")
    p.add_argument("--sizes", default="160,192,224")
    p.add_argument("--repeat", type=int, default=2)
    # A server touches each batch buffer's pages once, over its first few
    # batches; on a VM whose page faults are slow that costs as much as a
    # batch. Ten passes make the figure the steady rate a training run sees.
    p.add_argument("--epochs", type=int, default=10, help="passes over the shards per measurement")
    args = p.parse_args()
    if args.repeat < 1 or args.epochs < 1:
        p.error("--repeat and --epochs must be at least 1")
    try:
        max_sides = [int(v) for v in args.max_sides.split(",")]
        sizes = [int(v) for v in args.sizes.split(",")]
    except ValueError:
        p.error("--max-sides and --sizes are comma-separated whole numbers")
    paths = shard_paths(args.shards)
    images = count_images(paths)
    bytes_in = sum(os.path.getsize(path) for path in paths)
    print(f"{images} photos in {len(paths)} shards, {bytes_in / 1e6:.1f} MB")
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        shards = {}
        reference, seconds, out_bytes, _ = make_shards(args.build, args.shards, folder, "full")
        shards["full"] = reference
        print(f"make-shards --restart-markers: {images / seconds:.0f} photos/s, {out_bytes / 1e6:.1f} MB")
        for side in max_sides:
            pattern, seconds, out_bytes, _ = make_shards(args.build, args.shards, folder, f"m{side}", side)
            shards[side] = pattern
            print(f"make-shards --max-side {side} --restart-markers: {images / seconds:.0f} photos/s, "
                  f"{bytes_in / 1e6:.1f} MB in, {out_bytes / 1e6:.1f} MB out ({out_bytes / bytes_in:.2f})")

        def rate(pattern, size):
            return best(args.repeat, lambda: server(args.build, pattern, images, 1, "0", args.epochs,
                                                    extra=("--size", str(size))))

        base = rate(shards["full"], 224)
        print(f"\nimages/s, one worker on one core; ratio to 224 on full-resolution restart-marker shards ({base:.0f})")
        print(f"{'shards':<16}" + "".join(f"{size:>16}" for size in sizes))
        table = {}
        for key in ["full"] + max_sides:
            row = []
            for size in sizes:
                value = base if (key, size) == ("full", 224) else rate(shards[key], size)
                table[(key, size)] = value
                row.append(f"{value:9.0f} {value / base:5.2f}x")
            name = "full resolution" if key == "full" else f"max-side {key}"
            print(f"{name:<16}" + "".join(f"{cell:>16}" for cell in row))
        goal = table.get((320, 160))
        if goal is not None:
            ratio = goal / base
            print(f"\n{GOAL[0]}: {ratio:.2f}x (goal {GOAL[1]}x): {'met' if ratio >= GOAL[1] else 'NOT met'}")


if __name__ == "__main__":
    main()
