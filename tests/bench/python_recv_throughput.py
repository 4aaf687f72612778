#!/usr/bin/env python3
"""Python receive throughput: serve-ten -> a Python trainer's receive loop,
[256,224,224,3] uint8 + [256] int32 batches (38.5 MB), over ipc and tcp
loopback, for three receivers in the same run, taking turns:

  tensorcom     this package: tensorcom.zcom.Connection(url).recv()
  ref-path      the reference Connection's receive path re-created step for
                step: a pyzmq socket as it sets one up (LINGER 0, no other
                option), socket.recv_multipart() (pyzmq's default copy=True,
                as the reference calls it), each header read with
                np.frombuffer(h, "i8") and each array np.frombuffer(data,
                dtype, count).reshape(shape), no copy
  reference     NVlabs' tensorcom itself, zcom.Connection().connect(url).recv(),
                only with --reference DIR (a checkout whose tensorcom/ package
                imports: it needs pyzmq, torch and braceexpand)

Each figure is the best of --repeat runs (the machine is shared and noisy),
in GB/s of batch payload.

    tests/bench/python_recv_throughput.py [--build build] [--count 40] [--repeat 3] [--reference DIR]

Run with the interpreter the package was built for; PYTHONPATH must let it
import tensorcom (PYTHONPATH=build/bindings, or `meson devenv -C build`).
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transport_throughput import BATCH, MESSAGE_BYTES, SIZE, serve  # noqa: E402 (the same batches and server)

# One receiver, in a fresh interpreter: prints GB/s over `count` batches after 5 untimed.
RECEIVER = r"""
import sys, time
mode, url, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "tensorcom":
    from tensorcom import zcom
    c = zcom.Connection(url)
    recv = c.recv
elif mode == "reference":
    sys.path.insert(0, sys.argv[4])
    from tensorcom import zcom
    c = zcom.Connection()
    c.connect(url)
    recv = c.recv
else:
    import numpy as np, zmq
    kind, address = url.split("://", 1)
    socket = zmq.Context().socket(zmq.PULL)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(("ipc://" if kind.endswith("+ipc") else "tcp://") + address)
    def recv():
        frames = socket.recv_multipart()
        arrays = []
        for header, data in zip(frames[::2], frames[1::2]):
            words = np.frombuffer(header, dtype="i8")
            dtype = np.dtype(int(words[0]).to_bytes(8, "little").strip(b"\0").decode())
            shape = tuple(int(d) for d in words[3:3 + int(words[2])])
            arrays.append(np.frombuffer(data, dtype=dtype, count=int(np.prod(shape))).reshape(shape))
        return arrays
for _ in range(5):
    recv()
start = time.perf_counter()
nbytes = 0
for _ in range(count):
    nbytes += sum(a.nbytes for a in recv())
print(nbytes / (time.perf_counter() - start) / 1e9)
"""


def receive(mode, url, count, reference):
    out = subprocess.run([sys.executable, "-c", RECEIVER, mode, url, str(count), reference or ""], check=True,
                         capture_output=True, text=True, timeout=600)
    return float(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reference", help="a checkout of NVlabs/tensorcom to measure as well")
    args = parser.parse_args()
    modes = ["tensorcom", "ref-path"] + (["reference"] if args.reference else [])
    best = {(t, m): 0.0 for t in ("ipc", "tcp") for m in modes}
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        ten = os.path.join(tmp, "batches.ten")
        subprocess.run([f"{args.build}/tools/tenbin", "synth", "-b", str(BATCH), "-s", str(SIZE), "-n", "4", "-o", ten],
                       check=True)
        for _ in range(args.repeat):
            for transport, url in (("ipc", f"zrpush+ipc://{tmp}/sock"), ("tcp", "zrpush://127.0.0.1:0")):
                for mode in modes:
                    proc, bound = serve(args.build, ten, url)
                    try:
                        peer = ("zrpull+ipc://" + bound[len("ipc://"):] if transport == "ipc"
                                else "zrpull://" + bound[len("tcp://"):])
                        best[transport, mode] = max(best[transport, mode],
                                                    receive(mode, peer, args.count, args.reference))
                    finally:
                        proc.kill()
                        proc.wait()
    print(f"python receive throughput: {args.count} batches of {MESSAGE_BYTES} bytes "
          f"([{BATCH},{SIZE},{SIZE},3] u1 + [{BATCH}] i4), best of {args.repeat}, GB/s")
    for transport in ("ipc", "tcp"):
        ours = best[transport, "tensorcom"]
        others = "   ".join(f"{m} {best[transport, m]:6.2f} (x{ours / best[transport, m]:.1f})"
                           for m in modes[1:] if best[transport, m] > 0)
        print(f"  {transport}: tensorcom {ours:6.2f}   {others}")


if __name__ == "__main__":
    main()
