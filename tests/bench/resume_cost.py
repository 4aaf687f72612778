#!/usr/bin/env python3
"""What resuming costs: serve-imagenet-shards serves one epoch
whole (T_full), then is resumed from a token that marks the epoch's first
90% of batches consumed and serves the last 10% (T_resume). The resumed
server reads the consumed batches' samples (so that the order and the
replacements are an uninterrupted run's) but does not decode them; the
figure of interest is what that replay adds:

    overhead = T_resume - 0.1 * T_full, as a percentage of T_full

Target: under 5% of the epoch's serving time. The last 10% of
the full run's batches, timed as they arrived, is printed beside it.

    tests/bench/resume_cost.py [--shards 'DIR/r-{000000..000003}.tar'] [--build build] [--workers 1,2]

Without --shards it writes --images synthetic photos (500x375, JPEG q90,
about 94 KB each: smooth colour fields plus coarse and fine noise) into
--shard-count shards in a temporary folder (2000 by default: 184 MB). Times are the server's own
(its "done: served ... in S s": from opening the shards to the last batch
sent) and the wall clock from starting it to the last batch received; each
is the best of --repeat runs, the page cache warmed by a first run. The
receiver is tensorcom.Connection (from BUILD/bindings) with a queue large
enough to take an epoch, so that the server never waits for it.
Needs numpy and cv2 for the synthetic shards, and msgpack (the Connection
reads the batches' metadata with it).
"""
import argparse
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time

TARGET_PERCENT = 5.0


def photo(rng, np, cv2, height=375, width=500):
    """An RGB image whose JPEG at q90 is about a photo's size (94 KB at 500x375)."""
    y = np.linspace(0, 1, height, dtype=np.float32)[:, None, None]
    x = np.linspace(0, 1, width, dtype=np.float32)[None, :, None]
    img = 128 + 60 * np.sin(6.28 * (rng.uniform(0.5, 3, 3) * x + rng.uniform(0.5, 3, 3) * y + rng.uniform(0, 1, 3)))
    coarse = cv2.resize(rng.normal(0, 40, (height // 8, width // 8, 3)).astype(np.float32), (width, height),
                        interpolation=cv2.INTER_CUBIC)
    fine = rng.normal(0, 14, (height, width, 3)).astype(np.float32)
    return np.clip(img + coarse + fine, 0, 255).astype(np.uint8)


def write_shards(folder, images, shard_count, distinct=64):
    """images JPEGs (distinct ones, repeated under other keys) in shard_count tars; returns the brace pattern."""
    import cv2
    import numpy as np
    rng = np.random.default_rng(27)
    encoded = [cv2.imencode(".jpg", photo(rng, np, cv2), [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()
               for _ in range(min(distinct, images))]
    per_shard = -(-images // shard_count)
    for s in range(shard_count):
        with tarfile.open(os.path.join(folder, f"synthetic-{s:03d}.tar"), "w") as tar:
            for i in range(s * per_shard, min(images, (s + 1) * per_shard)):
                for ext, data in (("jpg", encoded[i % len(encoded)]), ("cls", str(i % 1000).encode())):
                    info = tarfile.TarInfo(f"img{i:07d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    print(f"wrote {images} synthetic 500x375 JPEGs (q90, {sum(map(len, encoded)) / len(encoded) / 1024:.0f} KB "
          f"mean) in {shard_count} shards to {folder}")
    return os.path.join(folder, "synthetic-{%03d..%03d}.tar" % (0, shard_count - 1))


def count_samples(pattern):
    paths = subprocess.run(["bash", "-c", f"printf '%s\\n' {pattern}"], capture_output=True, text=True,
                           check=True).stdout.split()
    keys = set()
    for path in paths:
        with tarfile.open(path) as tar:
            keys.update((path, m.name.split(".")[0]) for m in tar if m.isfile())
    return len(keys)


def serve(args, tensorcom, workers, epoch_batches, resume=None, token_after=None):
    """Runs the server for one epoch (from the token file `resume`, if
    given), receiving every batch. Returns (server seconds, wall seconds,
    arrival times from the start, images, token after `token_after`
    batches or None)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        url = f"ipc://{tmp}/s"
        con = tensorcom.Connection("zpull+" + url, timeout=args.timeout, recv_hwm=epoch_batches + 16,
                                   queue_bytes=0)
        cmd = [os.path.join(args.build, "servers", "serve-imagenet-shards"), "-u", args.shards, "--meta",
               "-b", str(args.batch), "--size", str(args.size), "-w", str(workers), "--seed", "5", "-r", "0",
               "--epochs", "1", "--epoch-batches", str(epoch_batches)]
        if args.shuffle is not None:
            cmd += ["--shuffle", str(args.shuffle)]
        if resume:
            cmd += ["--resume", resume]
        start = time.monotonic()
        server = subprocess.Popen(cmd + ["zpush+" + url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        try:
            arrivals, images, token = [], 0, None
            expected = epoch_batches - (0 if resume is None else args.consumed)
            while len(arrivals) < expected:
                batch = con.recv()
                arrivals.append(time.monotonic() - start)
                images += batch[0].shape[0]
                if token_after is not None and len(arrivals) == token_after:
                    token = con.state_dict()
            out, err = server.communicate(timeout=args.timeout)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
            con.close()
    if server.returncode != 0:
        sys.exit(f"server failed ({server.returncode}): {' '.join(cmd)}\n{out}\n{err}")
    m = re.search(r": done: served (\d+) samples in (\d+) batches in ([0-9.e+-]+) s", out)
    if not m:
        sys.exit(f"no summary line from the server:\n{out}\n{err}")
    return float(m.group(3)), arrivals[-1], arrivals, images, token


def measure(args, tensorcom, workers, epoch_batches, tmp):
    fulls, resumes, tails = [], [], []
    token_path = os.path.join(tmp, f"token-w{workers}.json")
    for rep in range(args.repeat + 1):
        server_s, wall_s, arrivals, images, token = serve(args, tensorcom, workers, epoch_batches,
                                                          token_after=args.consumed)
        consumed = token["streams"]["0/1"]["epochs"]["0"]["consumed"]
        if consumed != [[0, args.consumed]]:
            sys.exit(f"the first {args.consumed} batches received were {consumed}, not in order")
        with open(token_path, "w", encoding="utf-8") as f:
            json.dump(token, f)
        r_server_s, r_wall_s, r_arrivals, r_images, _ = serve(args, tensorcom, workers, epoch_batches,
                                                              resume=token_path)
        if rep == 0:
            continue  # warms the page cache
        fulls.append((server_s, wall_s, images, arrivals[0]))
        resumes.append((r_server_s, r_wall_s, r_images, r_arrivals[0]))
        tails.append(arrivals[-1] - arrivals[args.consumed - 1])
    return min(fulls), min(resumes), min(tails)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", help="brace pattern of photo shards (default: synthetic ones)")
    parser.add_argument("--build", default="build", help="the meson build folder")
    parser.add_argument("--workers", default="1,2", help="--workers values to measure")
    parser.add_argument("--images", type=int, default=2000, help="synthetic images")
    parser.add_argument("--shard-count", type=int, default=8, help="synthetic shards")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--shuffle", type=int, help="the servers' --shuffle (default: theirs, 1000)")
    parser.add_argument("--fraction", type=float, default=0.9, help="share of the epoch's batches consumed")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs (best kept), after a warm-up")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.build, "bindings"))
    import tensorcom

    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        if not args.shards:
            args.shards = write_shards(tmp, args.images, args.shard_count)
        samples = count_samples(args.shards)
        epoch_batches = samples // args.batch // 10 * 10 or samples // args.batch  # 90% a whole count
        args.consumed = round(args.fraction * epoch_batches)
        if not 0 < args.consumed < epoch_batches:
            sys.exit(f"{samples} samples make {epoch_batches} batches of {args.batch}: too few to resume in")
        print(f"{samples} samples, {epoch_batches} batches of {args.batch} at {args.size} px; resumed after "
              f"{args.consumed} ({args.consumed / epoch_batches:.0%}); --shuffle "
              f"{1000 if args.shuffle is None else args.shuffle}; best of {args.repeat}; "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        print(f"{'workers':>7} {'T_full s':>9} {'img/s':>7} {'T_resume s':>11} {'0.1*T_full':>10} "
              f"{'last 10% s':>10} {'overhead':>9} | wall: {'T_full':>7} {'T_resume':>9} {'overhead':>9} "
              f"| first batch: {'full':>6} {'resumed':>8}")
        worst = 0.0
        for workers in (int(w) for w in args.workers.split(",")):
            full, resumed, tail = measure(args, tensorcom, workers, epoch_batches, tmp)
            share = 1 - args.consumed / epoch_batches
            overhead = 100 * (resumed[0] - share * full[0]) / full[0]
            wall_overhead = 100 * (resumed[1] - share * full[1]) / full[1]
            worst = max(worst, overhead)
            print(f"{workers:>7} {full[0]:>9.3f} {full[2] / full[0]:>7.0f} {resumed[0]:>11.3f} "
                  f"{share * full[0]:>10.3f} {tail:>10.3f} {overhead:>8.1f}% |       {full[1]:>7.3f} {resumed[1]:>9.3f} "
                  f"{wall_overhead:>8.1f}% |              {full[3]:>6.3f} {resumed[3]:>8.3f}")
        print(f"replay overhead at most {worst:.1f}% of T_full (target < {TARGET_PERCENT:g}%): "
              f"{'met' if worst < TARGET_PERCENT else 'NOT met'}")


if __name__ == "__main__":
    main()
