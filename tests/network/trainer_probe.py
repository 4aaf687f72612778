"""A stand-in trainer for the network fault tests: receives batches from
tensorcom URLs with the Python Connection and prints one JSON line per batch
(arrival time, the server id and sample count from the batch's --meta), until
killed. Never restarted by the test: the point is that it needs no restart.

    python3 trainer_probe.py URL...
"""
import json
import sys
import time

import msgpack

import tensorcom


def main():
    connection = tensorcom.Connection(sys.argv[1:], timeout=None, heartbeat=0.5, reconnect=0.1, reconnect_max=0.5)
    while True:
        batch = connection.recv(timeout=1.0)
        if batch is None:
            print(json.dumps({"t": time.monotonic(), "idle": True}), flush=True)
            continue
        meta = msgpack.unpackb(batch[2].tobytes(), raw=False)
        print(json.dumps({"t": time.monotonic(), "server": meta["server"], "samples": len(meta["keys"])}), flush=True)


if __name__ == "__main__":
    main()
