#!/usr/bin/python3
"""The JPEG wire against the raw wire, on photos, 224 training crops, one run:

  bytes an image    what a receiver gets a crop in (the wire's bytes)
  server            images/s of serve-imagenet-shards on one core (one
                    worker, pinned; its consumer on the other core keeps
                    the batches compressed), --wire raw and --wire jpeg
                    (quality 95, 4:4:4), and the encode's share of the
                    jpeg server's time
  receiver          images a receiving process decodes per CPU second
                    (decompress_threads 1, its receiving included)
  fidelity          PSNR of the received images against the raw wire's
                    for the same samples (seeded servers make the same crops)

  lossless          the same for --wire zstd (bit-exact): its bytes,
                    server rate and decoding rate

Targets: bytes <= 1/5 of raw; server >= 0.75 x raw; receiver >= 2,500
images/s a core; PSNR mean >= 40 dB. The machine is shared and noisy:
compare figures of one run only.

    tests/bench/wire_compression.py --shards 'DIR/photos-{000000..000003}.tar' [--build build] [--wire jpeg:95,444]
        [--lossless zstd:1]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import augment_throughput as throughput  # noqa: E402  (shard_paths, count_images)

BATCH = 64
WARMUP = 2


def consume(build, pattern, batches, wire, decompress_threads, server_cpus="0", consumer_cpus="1", workers=1):
    """The consumer's JSON line: batches after a warm-up from one seeded server."""
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        url = f"ipc://{tmp}/s"
        consumer = subprocess.Popen(["taskset", "-c", consumer_cpus, f"{build}/tests/bench/recv-throughput",
                                     "zpull+" + url, "--count", str(batches - WARMUP), "--warmup", str(WARMUP),
                                     "--decompress-threads", str(decompress_threads)],
                                    stdout=subprocess.PIPE, text=True)
        time.sleep(0.2)
        server = subprocess.Popen(["taskset", "-c", server_cpus, f"{build}/servers/serve-imagenet-shards", "-u",
                                   pattern, "-b", str(BATCH), "-w", str(workers), "--epochs", "0", "-r", "0",
                                   "--size", "224", "--seed", "7", "--wire", wire, "--linger", "0", "zpush+" + url],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            out, _ = consumer.communicate(timeout=900)
        finally:
            server.terminate()
            server.wait(timeout=30)
        if consumer.returncode != 0:
            sys.exit(f"consumer failed: {out}")
        return json.loads(out)


def received_images(build, pattern, wire, batches):
    """The first batches' images through tensorcom.Connection (decoded there)."""
    sys.path.insert(0, os.path.join(build, "bindings"))
    import tensorcom
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        url = f"ipc://{tmp}/f"
        server = subprocess.Popen([f"{build}/servers/serve-imagenet-shards", "-u", pattern, "-b", str(BATCH),
                                   "-w", "2", "--epochs", "1", "-r", "0", "--size", "224", "--seed", "7",
                                   "--shuffle", "0", "--wire", wire, "zpush+" + url],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            c = tensorcom.Connection("zpull+" + url, timeout=60)
            images = np.concatenate([c.recv()[0] for _ in range(batches)])
            c.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    return images


def psnr_per_image(a, b):
    mse = ((a.astype(np.float64) - b.astype(np.float64)) ** 2).reshape(len(a), -1).mean(1)
    return 10 * np.log10(255.0 ** 2 / np.maximum(mse, 1e-12))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shards", required=True, help="brace pattern of photo shards")
    p.add_argument("--build", default="build")
    p.add_argument("--wire", default="jpeg:95,444")
    p.add_argument("--lossless", default="zstd:1")
    p.add_argument("--images", type=int, default=1280, help="images a server measurement takes")
    args = p.parse_args()
    paths = throughput.shard_paths(args.shards)
    pattern = "{" + ",".join(paths) + "}" if len(paths) > 1 else paths[0]
    batches = max(args.images // BATCH, WARMUP + 4)

    raw = consume(args.build, pattern, batches, "raw", 0)
    jpeg = consume(args.build, pattern, batches, args.wire, 0)
    raw_rate, jpeg_rate = raw["samples_per_s"], jpeg["samples_per_s"]
    raw_bytes, jpeg_bytes = raw["bytes"] / raw["samples"], jpeg["bytes"] / jpeg["samples"]
    # The receiver: two workers on core 0 feed it; it decodes on core 1.
    decoding = consume(args.build, pattern, batches, args.wire, 1, server_cpus="0", workers=2)
    decode_rate = decoding["samples"] / decoding["cpu_seconds"]
    raw_images = received_images(args.build, pattern, "raw", 4)
    fidelity = psnr_per_image(received_images(args.build, pattern, args.wire, 4), raw_images)
    lossless = consume(args.build, pattern, batches, args.lossless, 0)
    lossless_decoding = consume(args.build, pattern, batches, args.lossless, 1, server_cpus="0", workers=2)
    exact = np.array_equal(received_images(args.build, pattern, args.lossless, 4), raw_images)

    print(f"photos: {len(paths)} shards, 224 crops, batches of {BATCH}, --wire {args.wire}")
    print(f"bytes an image        raw {raw_bytes:,.0f}  jpeg {jpeg_bytes:,.0f}  "
          f"({raw_bytes / jpeg_bytes:.2f} x smaller; goal >= 5)")
    print(f"server, one core      raw {raw_rate:.0f} images/s  jpeg {jpeg_rate:.0f} images/s  "
          f"({jpeg_rate / raw_rate:.2f} x; goal >= 0.75); encoding {100 * (1 - jpeg_rate / raw_rate):.0f}% "
          "of the jpeg server's time")
    print(f"receiver decode       {decode_rate:.0f} images per CPU second (goal >= 2500)")
    print(f"fidelity              PSNR mean {fidelity.mean():.2f} dB, min {fidelity.min():.2f} dB over "
          f"{len(fidelity)} images (goal mean >= 40)")
    lossless_bytes = lossless["bytes"] / lossless["samples"]
    print(f"lossless {args.lossless:<12} {lossless_bytes:,.0f} bytes an image ({raw_bytes / lossless_bytes:.2f} x "
          f"smaller), server {lossless['samples_per_s']:.0f} images/s ({lossless['samples_per_s'] / raw_rate:.2f} x "
          f"raw), receiver {lossless_decoding['samples'] / lossless_decoding['cpu_seconds']:.0f} images per CPU "
          f"second, {'bit-exact' if exact else 'NOT bit-exact'}")
    print(f"link arithmetic       at 25 Gbit/s: raw {25e9 / 8 / raw_bytes:,.0f} images/s, "
          f"jpeg {25e9 / 8 / jpeg_bytes:,.0f} images/s, lossless {25e9 / 8 / lossless_bytes:,.0f} images/s")


if __name__ == "__main__":
    main()
