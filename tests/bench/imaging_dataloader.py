#!/usr/bin/python3
"""tensorcom.imaging in a PyTorch DataLoader: images/s per worker against
torchvision's PIL transforms on the same JPEGs, measured in one run:
  (1) torchvision, 1 worker, as usually run: Image.open(BytesIO(b)).convert("RGB"),
      then RandomResizedCrop(224) + RandomHorizontalFlip + PILToTensor,
      batches by the DataLoader's default collate;
  (2) tensorcom, 1 worker: Compose([RandomResizedCrop(224),
      RandomHorizontalFlip(), PILToTensor()]) on the bytes, batches by
      tensorcom.collate.SharedRingCollate (shared memory reused from batch
      to batch, where the default collate faults in fresh pages for each);
  (3), (4) the same with 2 workers (--workers to change the counts: the
      figures are numbered on, two for each count);
  (2t), (4t) tensorcom's transforms with the default collate, and (1s),
      (3s) torchvision's with SharedRingCollate: what each half of the
      swap gives alone;
  (0) the DataLoader alone, default collate, and (0s) with
      SharedRingCollate: the same, with a transform that returns a ready
      CHW tensor: its own cost per image (collating into shared memory,
      passing the batch to the main process), which every transform pays
      on top of its work (where the main process has a core of its own;
      else the most the DataLoader passes on these cores).
With --val, Resize(256) + CenterCrop(224) instead of the crop and flip.
The dataset yields (bytes, label) pairs of the shards' samples (JPEG and
.cls), read into memory first so that neither the disk nor tar parsing
counts, --images of them (the shards' samples over again if they hold
fewer), in batches of --batch-size collated in the workers. Worker k is
pinned to core k, the main process (which reads one byte of each page of
each batch, as a copy to the GPU would read them all) to the next core
where there is one. Each DataLoader's workers are started and have made six
batches each before its timed pass (so that a shared collate's ring is
grown: a long run's steady state). Images/s per worker = images/s / workers; the
goal: (2) >= 3x (1), tensorcom's DataLoader against torchvision's as
usually run.

Then, on one core in this process, what the Python call costs:
  (a) torchvision's transform (as in (1)) on each image in a loop;
  (b) tensorcom.imaging's transform (as in (2)) the same way;
  (c) tensorcom.imaging's Compose([RandomResizedCrop(224),
      RandomHorizontalFlip()]), seeded to draw the crops augment-alone draws;
  (d) augment-alone: the same per-image work in C++ alone, from the same
      shards (build/tests/bench/augment-alone, --build to find it);
  (e) the call of (c) with RandomResizedCrop(1), on an 8x8 JPEG: the same
      Python path with next to no C++ work, the call's fixed cost.
(a) / (b) is the transforms' ratio alone; through the DataLoader,
((a) + (0)) / ((b) + (0s)) is what to expect of (2) / (1). Where fresh
shared-memory pages are slow to fault in (some virtual machines), (0) is
large, and (0s) much smaller.
(c) - (d) is the per-image overhead of the Python call (argument checks,
drawing the sample's seed, the output array, releasing the GIL), in
microseconds and as a share of (c): a difference of two larger figures, so
noisy; (e) measures it directly (an upper bound: it includes decoding one
8x8 block). (c) and (d) are the training transforms whatever --val says
(augment-alone has only those), each the best of --repeat runs, taken in
turns.
(a)..(d) time the images in chunks of 50, each chunk's best of --passes
passes, as augment-alone does; the DataLoader figures and (e) are the best
of --repeat runs. The machine is shared and noisy.

    tests/bench/imaging_dataloader.py --shards 'DIR/photos-{000000..000003}.tar' [--build build] [--val]
        [--images 2000] [--batch-size 64] [--workers 1,2]

Make the shards with ../shared/bench/make-photo-shards (see README).
Needs torch, torchvision and PIL; tensorcom is imported from --build's
bindings/ when it is not installed.
"""
import argparse
import gc
import io
import json
import os
import subprocess
import sys
import tarfile
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, default_collate
from torchvision import transforms as T


def _build_dir():
    """--build's value, read before argparse so that the package can be imported from it."""
    for i, arg in enumerate(sys.argv):
        if arg == "--build" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--build="):
            return arg.split("=", 1)[1]
    return "build"


try:
    from tensorcom import imaging
except ImportError:  # not installed: the one in the build folder
    sys.path.insert(0, os.path.join(_build_dir(), "bindings"))
    from tensorcom import imaging
from tensorcom.collate import SharedRingCollate  # noqa: E402

from augment_throughput import shard_paths  # noqa: E402  (beside this script)

TARGET = 3.0  # tensorcom.imaging's images/s per worker over torchvision's
CHUNK = 50  # images per timed chunk in (a)..(d), as augment-alone
WARM_BATCHES = 6  # a worker's batches before a DataLoader's timed pass: prefetched, held and a spare


def load_samples(paths):
    """(JPEG bytes, label) of every sample with a .jpg/.jpeg and a .cls, in
    tar order; members are grouped by key (the name up to the first dot of
    the file name), as webdataset groups them."""
    samples = []
    for path in paths:
        members = {}
        with tarfile.open(path) as tar:
            for m in tar:
                if not m.isfile():
                    continue
                folder, _, base = m.name.rpartition("/")
                stem, _, extension = base.partition(".")
                members.setdefault(f"{folder}/{stem}", {})[extension.lower()] = tar.extractfile(m).read()
        for sample in members.values():  # dicts keep the tar's order
            jpeg = sample.get("jpg", sample.get("jpeg"))
            if jpeg is not None and "cls" in sample:
                samples.append((jpeg, int(sample["cls"])))
    return samples


class TorchvisionTransform:
    """PIL decoding, as ImageFolder's loader or webdataset's .decode("pil"),
    then torchvision's transforms."""

    def __init__(self, val):
        if val:
            self.transform = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
        else:
            self.transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])

    def __call__(self, data):
        return self.transform(Image.open(io.BytesIO(data)).convert("RGB"))


def tensorcom_transform(val):
    if val:
        return imaging.Compose([imaging.Resize(256), imaging.CenterCrop(224), imaging.PILToTensor()])
    return imaging.Compose([imaging.RandomResizedCrop(224), imaging.RandomHorizontalFlip(), imaging.PILToTensor()])


class Ready:
    """A transform without work: the same CHW uint8 view every time."""

    def __init__(self):
        self.image = torch.zeros(224, 224, 3, dtype=torch.uint8).permute(2, 0, 1)

    def __call__(self, data):
        return self.image


class Samples(Dataset):
    """count (transform(bytes), label) pairs, cycling through samples."""

    def __init__(self, samples, count, transform):
        self.samples, self.count, self.transform = samples, count, transform

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        data, label = self.samples[index % len(self.samples)]
        return self.transform(data), label


class PinWorker:
    """worker_init_fn: worker k on cores[k]."""

    def __init__(self, cores):
        self.cores = cores

    def __call__(self, worker):
        if self.cores:
            os.sched_setaffinity(0, {self.cores[worker]})


def touch_pages(images):
    """A byte of each page of a batch read, as a copy to the GPU reads them."""
    flat = images.view(-1)
    return int(flat[::4096].sum()) if flat.dtype == torch.uint8 else 0


def loader_rate(dataset, workers, batch_size, cores, collate):
    """images/s through a DataLoader with workers processes, after a warm-up."""
    pin = len(cores) >= workers
    everything = os.sched_getaffinity(0)
    if pin and len(cores) > workers:
        os.sched_setaffinity(0, {cores[workers]})  # the main process off the workers' cores
    try:
        loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers, persistent_workers=True,
                            worker_init_fn=PinWorker(cores[:workers] if pin else None), collate_fn=collate)
        warm = iter(loader)
        for _ in range(min(WARM_BATCHES * workers, len(loader))):
            next(warm)  # every worker started, and its shared-memory ring (if any) grown to what it needs
        timed = iter(loader)  # waits for the warm-up's batches in flight, then hands out this pass's
        start = time.perf_counter()
        images = 0
        for batch, labels in timed:
            touch_pages(batch)
            images += len(labels)
        seconds = time.perf_counter() - start
        del warm, timed, loader
        gc.collect()
    finally:
        os.sched_setaffinity(0, everything)
    return images / seconds


def chunked_seconds(function, items, passes, before_pass=None):
    """Seconds for function over items: each chunk of CHUNK items timed
    passes times, its best kept (as augment-alone times its images)."""
    best = [float("inf")] * ((len(items) + CHUNK - 1) // CHUNK)
    for _ in range(passes):
        if before_pass is not None:
            before_pass()
        for c in range(len(best)):
            chunk = items[c * CHUNK:(c + 1) * CHUNK]
            start = time.perf_counter()
            for item in chunk:
                function(item)
            best[c] = min(best[c], time.perf_counter() - start)
    return sum(best)


def in_process_us(function, jpegs, passes, core, before_pass=None):
    """Microseconds per image of function over jpegs, on one core."""
    everything = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        function(jpegs[0])  # first-call set-up out of the timing
        return chunked_seconds(function, jpegs, passes, before_pass) / len(jpegs) * 1e6
    finally:
        os.sched_setaffinity(0, everything)


def augment_alone_us(build, paths, passes, core):
    """augment-alone's microseconds per image, on one core, or None."""
    program = os.path.join(build, "tests", "bench", "augment-alone")
    if not os.access(program, os.X_OK):
        print(f"(d) unavailable: no {program} (--build)", file=sys.stderr)
        return None
    out = subprocess.run(["taskset", "-c", str(core), program, "--passes", str(passes), *paths],
                         capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        print(f"(d) unavailable: {out.stderr.strip()}", file=sys.stderr)
        return None
    return 1e6 / json.loads(out.stdout)["images_per_s"]


def call_cost_us(repeat, core, calls=5000):
    """Microseconds of a call of the fused training transform that does next
    to no C++ work: an 8x8 JPEG to a 1x1 crop."""
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (90, 120, 150)).save(buffer, "JPEG")
    tiny = buffer.getvalue()
    transform = imaging.Compose([imaging.RandomResizedCrop(1), imaging.RandomHorizontalFlip()])
    return min(in_process_us(transform, [tiny] * calls, 1, core) for _ in range(repeat))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", required=True, help="brace pattern of tar shards (JPEG + .cls samples)")
    parser.add_argument("--build", default="build", help="the build folder, for tests/bench/augment-alone")
    parser.add_argument("--val", action="store_true", help="Resize(256) + CenterCrop(224) instead of training's")
    parser.add_argument("--images", type=int, default=2000, help="images per DataLoader pass")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", default="1,2", help="worker counts to time, comma-separated")
    parser.add_argument("--repeat", type=int, default=2, help="runs per figure (the best kept)")
    parser.add_argument("--passes", type=int, default=3, help="in-process passes (each chunk's best kept)")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    paths = shard_paths(args.shards)
    samples = load_samples(paths)
    if not samples:
        sys.exit(f"no JPEG + .cls samples in {args.shards}")
    jpegs = [data for data, _ in samples]
    cores = sorted(os.sched_getaffinity(0))
    torch.set_num_threads(1)
    kind = "validation (Resize(256) + CenterCrop(224))" if args.val else "training (RandomResizedCrop(224) + flip)"
    transforms = {"torchvision": TorchvisionTransform(args.val), "tensorcom": tensorcom_transform(args.val),
                  "DataLoader": Ready()}
    collates = {"default": default_collate, "shared": SharedRingCollate()}
    # (name, transform, collate): the goal's two first, then each half of the swap alone.
    runs = [("torchvision", "torchvision", "default"), ("tensorcom", "tensorcom", "shared"),
            ("tensorcom, default collate", "tensorcom", "default"),
            ("torchvision, shared collate", "torchvision", "shared"),
            ("DataLoader", "DataLoader", "default"), ("DataLoader, shared collate", "DataLoader", "shared")]

    rates = {}
    for _ in range(args.repeat):
        for workers in counts:
            for name, transform, collate in runs:
                dataset = Samples(samples, args.images, transforms[transform])
                rate = loader_rate(dataset, workers, args.batch_size, cores, collates[collate])
                rates[name, workers] = max(rates.get((name, workers), 0.0), rate)

    core = cores[0]
    us = {"(a)": in_process_us(transforms["torchvision"], jpegs, args.passes, core),
          "(b)": in_process_us(transforms["tensorcom"], jpegs, args.passes, core)}
    generator = imaging.Generator(0)  # image i draws from (0, i), as augment-alone's sample i
    seeded = imaging.Compose([imaging.RandomResizedCrop(224, generator=generator), imaging.RandomHorizontalFlip()])
    for _ in range(args.repeat):  # in turns, so that a noisy spell does not land on one of them only
        figures = {"(c)": in_process_us(seeded, jpegs, args.passes, core, lambda: generator.manual_seed(0)),
                   "(d)": augment_alone_us(args.build, paths, args.passes, core)}
        for figure, value in figures.items():
            if value is not None:
                us[figure] = min(us.get(figure, float("inf")), value)
    us["(e)"] = call_cost_us(args.repeat, core)

    print(f"{len(samples)} JPEGs from {len(paths)} shards; {kind}; DataLoader passes of {args.images} images in "
          f"batches of {args.batch_size}, best of {args.repeat}; cores {','.join(map(str, cores))}")
    if len(cores) < max(counts):
        print(f"(fewer cores than workers: {max(counts)} workers ran unpinned)")
    labels = {}
    for i, workers in enumerate(counts):
        numbers = {"torchvision": f"({2 * i + 1})", "tensorcom": f"({2 * i + 2})",
                   "tensorcom, default collate": f"({2 * i + 2}t)", "torchvision, shared collate": f"({2 * i + 1}s)",
                   "DataLoader": "(0)", "DataLoader, shared collate": "(0s)"}
        for name, _, _ in runs:
            figure = labels[name, workers] = numbers[name]
            rate = rates[name, workers]
            print(f"{figure:5s} {name:28s} {workers} worker{'s' if workers > 1 else ' '} {rate:8.1f} images/s "
                  f"{rate / workers:8.1f} per worker = {workers * 1e6 / rate:7.1f} us/image")
    for workers in counts:
        def ratio(a, b):
            return rates[a, workers] / rates[b, workers]

        goal = ratio("tensorcom", "torchvision")
        plural = "s" if workers > 1 else ""
        print(f"{labels['tensorcom', workers]} / {labels['torchvision', workers]}: {goal:.2f} tensorcom (transforms + "
              f"SharedRingCollate) / torchvision (default collate), images/s per worker, {workers} worker{plural} "
              f"(goal >= {TARGET:g}x: {'met' if goal >= TARGET else 'missed'}); the transforms alone, both with "
              f"SharedRingCollate {ratio('tensorcom', 'torchvision, shared collate'):.2f}x, both with the default "
              f"collate {ratio('tensorcom, default collate', 'torchvision'):.2f}x")
    if 1 in counts:
        for workers in (w for w in counts if w > 1):
            speedup = {name: rates[name, workers] / rates[name, 1] for name in ("torchvision", "tensorcom")}
            print(f"1 -> {workers} workers: torchvision {speedup['torchvision']:.2f}x, "
                  f"tensorcom {speedup['tensorcom']:.2f}x")

    print(f"in this process, one core (core {core}), {len(jpegs)} images, best of {args.passes} per chunk of {CHUNK}:")
    print(f"(a) torchvision's transform, as (1)       {us['(a)']:8.1f} us/image")
    print(f"(b) tensorcom.imaging's transform, as (2) {us['(b)']:8.1f} us/image   "
          f"(a) / (b) = {us['(a)'] / us['(b)']:.2f}")
    print(f"(c) tensorcom RandomResizedCrop+flip, HWC {us['(c)']:8.1f} us/image   (training)")
    if "(d)" in us:
        overhead = us["(c)"] - us["(d)"]
        print(f"(d) augment-alone, the same crops in C++  {us['(d)']:8.1f} us/image")
        print(f"Python call overhead (c) - (d): {overhead:.1f} us/image = {overhead / us['(c)']:.1%} of (c)")
    print(f"(e) the call's fixed cost (8x8 JPEG to 1x1): {us['(e)']:.1f} us/call = {us['(e)'] / us['(c)']:.1%} of (c)")
    for workers in counts:
        plural = "s" if workers > 1 else ""
        if len(cores) <= workers:  # the main process shared the workers' cores: (0) is no cost per worker
            print(f"(0), (0s) at {workers} worker{plural}: {rates['DataLoader', workers]:.0f} and "
                  f"{rates['DataLoader, shared collate', workers]:.0f} images/s, the DataLoader's ceiling on "
                  f"{len(cores)} cores")
            continue
        alone = {name: workers * 1e6 / rates[name, workers] for name in ("DataLoader", "DataLoader, shared collate")}
        default, shared = alone["DataLoader"], alone["DataLoader, shared collate"]
        print(f"(0) at {workers} worker{plural}: {default:.1f} us/image of DataLoader per worker, (0s) {shared:.1f}: "
              f"((a) + (0)) / ((b) + (0s)) = {(us['(a)'] + default) / (us['(b)'] + shared):.2f} to expect of "
              f"{labels['tensorcom', workers]} / {labels['torchvision', workers]}")
    print(json.dumps({"images_per_s": {f"{name}/{workers}": rate for (name, workers), rate in rates.items()},
                      "us_per_image": us}))


if __name__ == "__main__":
    main()
