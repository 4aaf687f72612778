#!/usr/bin/env python3
"""What Connection.send's copy costs: a Python sender of [256,224,224,3]
uint8 + [256] int32 batches (38.5 MB) to a Python receiver in another
process, over ipc, with copy=True (the default: a refilled buffer is safe)
and copy=False (ZeroMQ reads the arrays themselves), taking turns in the
same run. Each figure is the best of --repeat runs (the machine is shared
and noisy), in GB/s of batch payload from the first send to the receiver's
last batch; the ratio is copy=True over copy=False.

    tests/bench/python_send_copy.py [--count 40] [--repeat 3]

PYTHONPATH must let it import tensorcom (PYTHONPATH=build/bindings).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import tensorcom

RECEIVER = r"""
import sys, tensorcom
c = tensorcom.Connection(sys.argv[1], timeout=60)
for _ in range(int(sys.argv[2])):
    c.recv()
print("done", flush=True)
"""


def one_run(url, count, copy):
    images = np.zeros((256, 224, 224, 3), np.uint8)
    labels = np.zeros(256, np.int32)
    with tensorcom.Connection("zrpush+" + url, copy=copy) as sender:
        receiver = subprocess.Popen([sys.executable, "-c", RECEIVER, "zrpull+" + url, str(count + 3)],
                                    stdout=subprocess.PIPE, text=True)
        for _ in range(3):  # untimed: the receiver connects and warms up
            sender.send([images, labels])
        start = time.perf_counter()
        for i in range(count):
            images[0, 0, 0, 0] = i % 256  # a sender refilling its buffer
            sender.send([images, labels])
        receiver.stdout.readline()
        seconds = time.perf_counter() - start
        receiver.wait(timeout=60)
    return count * (images.nbytes + labels.nbytes) / seconds / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tc-bench-", dir="/tmp") as d:
        best = {True: 0.0, False: 0.0}
        for r in range(args.repeat):
            for copy in (True, False):
                best[copy] = max(best[copy], one_run(f"ipc://{d}/send{r}{copy}", args.count, copy))
    print(f"send copy=True  {best[True]:.2f} GB/s")
    print(f"send copy=False {best[False]:.2f} GB/s")
    print(f"ratio copy=True / copy=False {best[True] / best[False]:.2f}")


if __name__ == "__main__":
    main()
