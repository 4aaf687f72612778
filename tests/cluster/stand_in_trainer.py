#!/usr/bin/env python3
"""A CPU stand-in for a data-parallel trainer rank: receives batches with
the tensorcom bindings and writes what it got (each batch's server,
sequence and sample keys, from the servers' --meta) as JSON, for the tests
to check exactly-once and equal batch counts. No model, no GPU.

    stand_in_trainer.py --urls URLS --out FILE [--split | --dataset]
                        [--rank R --world W] [--batches N] [--idle S]
                        [--token FILE]

Rank and world default to RANK and WORLD_SIZE (as torchrun and
examples/slurm/ set them), else 0 of 1. --split connects to the rank's
share of the servers (tensorcom.rank_urls); --dataset does the same through
TensorcomDataset(rank=, world=) and a DataLoader, as a torch user would;
otherwise all URLs are this rank's (one server group per rank, or PUB).
It stops after --batches, or once no batch came for --idle seconds after
the first (the servers ran their --epochs and exited).

--token FILE makes it a resumable rank, as train.py --checkpoint is: it
loads FILE if it exists (Connection.load_state_dict), receives the rest of
that epoch (Connection.iter_epoch; servers need --meta), says each batch on
a line, and writes its token to FILE atomically at the end; SIGUSR1 or
SIGTERM stop it after the current batch, with the token written, exit
status 128 + the signal's number.
"""
import argparse
import json
import os
import signal
import sys
import time

import msgpack

import tensorcom

FIRST_BATCH_WAIT_S = 30.0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--urls", required=True, help="tensorcom URLs (brace-expanded, space-separated)")
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--rank", type=int, default=int(os.environ.get("RANK", 0)))
    p.add_argument("--world", type=int, default=int(os.environ.get("WORLD_SIZE", 1)))
    how = p.add_mutually_exclusive_group()
    how.add_argument("--split", action="store_true", help="connect to tensorcom.rank_urls(URLS, rank, world)")
    how.add_argument("--dataset", action="store_true", help="receive through TensorcomDataset(rank=, world=)")
    p.add_argument("--batches", type=int, help="stop after this many batches")
    p.add_argument("--idle", type=float, default=2.0, help="stop after this long without a batch")
    p.add_argument("--delay", type=float, default=0.0, help="seconds of 'training' per batch (a slow rank)")
    p.add_argument("--token", help="resume token file: loaded if it exists, written at the end and on USR1/TERM")
    return p.parse_args()


def received(connection, args):
    """Batches until --batches, or --idle seconds of silence after the first."""
    start = time.monotonic()
    count = 0
    while args.batches is None or count < args.batches:
        first = count == 0
        batch = connection.recv(timeout=FIRST_BATCH_WAIT_S if first else args.idle)
        if batch is None:
            if first:
                raise tensorcom.TimeoutError(f"no batch in {time.monotonic() - start:.0f} s from {args.urls}")
            return
        count += 1
        yield batch


def via_dataset(args):
    import torch
    length = args.batches  # a DDP user's epoch: servers per rank x --epoch-batches
    dataset = tensorcom.TensorcomDataset(args.urls.split(), length, rank=args.rank, world=args.world,
                                         timeout=FIRST_BATCH_WAIT_S)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None)
    return loader, dataset.urls


def describe(batch):
    meta = msgpack.unpackb(bytes(batch[2].tobytes()), raw=False)
    return {"server": meta["server"], "sequence": meta["seq"], "keys": meta["keys"], "stream": meta.get("stream"),
            "epoch": meta.get("epoch"), "batch": meta.get("batch")}


def write_atomically(path, value):
    temp = f"{path}.tmp{os.getpid()}"
    with open(temp, "w") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)


def resumable_epoch(connection, args):
    """One epoch (the rest of the token's) until a stop signal; returns
    (batches described, the signal's number or None)."""
    stop = []
    for signum in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(signum, lambda number, _frame: stop.append(number))
    if os.path.exists(args.token):
        with open(args.token) as f:
            connection.load_state_dict(json.load(f))
    batches = []
    for batch in connection.iter_epoch():
        batches.append(describe(batch))
        print(f"stand-in trainer rank {args.rank}: batch {len(batches)}", flush=True)
        time.sleep(args.delay)
        if stop:
            break
    write_atomically(args.token, connection.state_dict())
    return batches, (stop[0] if stop else None)


def main():
    args = parse_args()
    stopped = None  # the signal that stopped a --token run
    if args.dataset and args.batches is None:
        sys.exit("stand_in_trainer.py: --dataset needs --batches, the dataset's length")
    if args.dataset:
        loader, urls = via_dataset(args)
        batches = [describe([t.numpy() for t in batch]) for batch in loader]
    else:
        urls = tensorcom.rank_urls(args.urls.split(), args.rank, args.world) if args.split else args.urls.split()
        connection = tensorcom.Connection(urls, timeout=FIRST_BATCH_WAIT_S)
        if args.token:
            batches, stopped = resumable_epoch(connection, args)
        else:
            batches = []
            for batch in received(connection, args):
                batches.append(describe(batch))
                time.sleep(args.delay)
        connection.close()
    with open(args.out, "w") as f:
        json.dump({"rank": args.rank, "world": args.world, "urls": urls, "batches": batches}, f)
    print(f"stand-in trainer rank {args.rank} of {args.world}: {len(batches)} batches from {len(urls)} servers"
          + (f", stopped by {signal.Signals(stopped).name}" if stopped else ""), flush=True)
    return 0 if stopped is None else 128 + stopped


if __name__ == "__main__":
    sys.exit(main())
