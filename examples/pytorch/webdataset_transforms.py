#!/usr/bin/env python3
"""Webdataset tar shards through a PyTorch DataLoader, with
tensorcom.imaging's transforms on the images' bytes: the data-loading half
of a training loop, without the webdataset package.

A shard is a tar file whose members are grouped into samples by key, as
webdataset groups them: the key is the member's path up to the first dot of
its file name, the rest is the extension (0001.jpg and 0001.cls are the
image and the label of sample 0001; a/b.x.jpg has key a/b, extension x.jpg).
The dataset reads the shards with Python's tarfile, one after the other,
splits them across the DataLoader's workers (worker k reads shards k,
k + workers, ...), and yields (transform(image bytes), int(cls)). The image
is the sample's first member with an image extension (jpg, jpeg, png, ppm,
pgm, pnm, bmp, webp), as webdataset's to_tuple("jpg;png;...") picks it.

With webdataset and torchvision, the same pipeline reads:

    dataset = (wds.WebDataset(urls, shardshuffle=True).shuffle(1000).decode("pil")
               .to_tuple("jpg", "cls").map_tuple(torchvision_transform, lambda cls: cls))

and with webdataset and tensorcom.imaging (no .decode: the transform takes
the bytes, and decodes only the pixels its output needs):

    dataset = (wds.WebDataset(urls, shardshuffle=True).shuffle(1000)
               .to_tuple("jpg", "cls").map_tuple(tensorcom_transform, int))

The DataLoader is the one a torchvision pipeline has. --shared-collate
sets its collate_fn to tensorcom.collate.SharedRingCollate(): batches reach
the main process in shared memory reused from batch to batch, where the
default collate faults in fresh pages for each.

Batches are uint8 (N, 3, 224, 224) (the transforms end in PILToTensor),
converted to float and normalised after collation, on the GPU when there is
one, else on the CPU. Each epoch prints its images/s, counted from the
first batch on (the workers' start-up is reported apart), and the share of
that time the loop waited for the DataLoader.

    PYTHONPATH=build/bindings examples/pytorch/webdataset_transforms.py 'DIR/shard-{000000..000003}.tar' \\
        [--val] [--workers 4] [--batch-size 256] [--epochs 1] [--limit 50] [--shuffle 1000] [--shared-collate] \\
        [--torchvision]

Shards are paths, each brace-expanded here without a shell ({000000..000003}
ranges keep their zero padding, {a,b} lists; not nested). --val uses the
validation transforms (Resize(256) + CenterCrop(224)), else the training
ones (RandomResizedCrop(224) + RandomHorizontalFlip); --limit stops each
epoch after that many batches; --shuffle N mixes samples in a buffer of N
per worker (0: shard order); --torchvision decodes with PIL and runs
torchvision's transforms instead, to compare images/s. Give at least as
many shards as workers: a worker without a shard yields nothing.
"""

import argparse
import io
import os
import random
import re
import tarfile

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from loader_loop import Normalize, collate_fn, run_epoch

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "ppm", "pgm", "pnm", "bmp", "webp")


def expand_braces(pattern):
    """Shell-free brace expansion: 'a-{000..002}.tar' -> a-000.tar, a-001.tar,
    a-002.tar; 'x{a,b}' -> xa, xb. Several groups expand left to right."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, body, tail = pattern[:match.start()], match.group(1), pattern[match.end():]
    span = re.fullmatch(r"(-?\d+)\.\.(-?\d+)", body)
    if span:
        low, high = span.groups()
        padded = low.lstrip("-").startswith("0") or high.lstrip("-").startswith("0")
        width = max(len(low), len(high)) if padded else 0
        step = 1 if int(high) >= int(low) else -1
        choices = [str(n).zfill(width) for n in range(int(low), int(high) + step, step)]
    elif "," in body:
        choices = body.split(",")
    else:
        return [head + "{" + body + "}" + rest for rest in expand_braces(tail)]  # a literal {x}, as bash keeps it
    return [head + choice + rest for choice in choices for rest in expand_braces(tail)]


def split_name(name):
    """(key, extension) by webdataset's rule, or None for a name without a dot."""
    folder, _, base = name.rpartition("/")
    stem, dot, extension = base.partition(".")
    if not dot or not stem:
        return None
    return (f"{folder}/{stem}" if folder else stem), extension.lower()


def tar_samples(path):
    """Samples of a tar shard: dicts of extension -> bytes, plus '__key__'.
    Members of a sample must lie next to each other in the tar, as
    webdataset writes them; a repeated extension starts a new sample."""
    sample = None
    with tarfile.open(path, mode="r|*") as tar:  # a stream: reads the shard once, front to back
        for member in tar:
            parts = split_name(member.name) if member.isfile() else None
            if parts is None or os.path.basename(member.name).startswith("__"):
                continue
            key, extension = parts
            if sample is not None and (sample["__key__"] != key or extension in sample):
                yield sample
                sample = None
            if sample is None:
                sample = {"__key__": key, "__url__": path}
            sample[extension] = tar.extractfile(member).read()
    if sample is not None:
        yield sample


def image_and_label(sample):
    """(image bytes, int label): to_tuple("jpg;png;...", "cls")."""
    image = next((sample[e] for e in IMAGE_EXTENSIONS if e in sample), None)
    if image is None or "cls" not in sample:
        members = sorted(e for e in sample if not e.startswith("__"))
        raise ValueError(f"{sample['__url__']}: sample {sample['__key__']} has no "
                         f"{'image' if image is None else '.cls'} member (it has {members})")
    return image, int(sample["cls"])  # int() reads the ASCII digits of the bytes


class ShardDataset(IterableDataset):
    """(transform(image), label) from webdataset tar shards, each DataLoader
    worker reading its own share of the shards; shard order (and, with a
    buffer, sample order) reshuffled every epoch."""

    def __init__(self, shards, transform, shuffle=0, seed=0):
        self.shards = list(shards)
        self.transform = transform
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        """Call before each epoch's iter(loader): workers see it (they are started per epoch here)."""
        self.epoch = epoch

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        shards = list(self.shards)
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(shards)  # the same order in every worker
        mine = shards[worker::workers]
        samples = (image_and_label(s) for shard in mine for s in tar_samples(shard))
        if self.shuffle:
            samples = shuffled(samples, self.shuffle, random.Random(f"{self.seed}/{self.epoch}/{worker}"))
        for image, label in samples:
            yield self.transform(image), label


def shuffled(items, size, rng):
    """webdataset's .shuffle(size): a buffer of size items, each output a random one of them."""
    buffer = []
    for item in items:
        buffer.append(item)
        if len(buffer) >= size:
            i = rng.randrange(len(buffer))
            buffer[i], buffer[-1] = buffer[-1], buffer[i]
            yield buffer.pop()
    rng.shuffle(buffer)
    yield from buffer


def tensorcom_transform(val):
    """tensorcom.imaging's transforms: they take the encoded bytes."""
    from tensorcom import imaging

    if val:
        return imaging.Compose([imaging.Resize(256), imaging.CenterCrop(224), imaging.PILToTensor()])
    return imaging.Compose([imaging.RandomResizedCrop(224), imaging.RandomHorizontalFlip(), imaging.PILToTensor()])


class TorchvisionTransform:
    """The torchvision original: decode with PIL (webdataset's .decode("pil")),
    then the PIL transforms; PILToTensor rather than the classic ToTensor +
    Normalize, to compare like with like."""

    def __init__(self, val):
        from torchvision import transforms as T

        if val:
            self.transform = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
        else:
            self.transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])

    def __call__(self, data):
        from PIL import Image

        return self.transform(Image.open(io.BytesIO(data)).convert("RGB"))


def parse_args():
    description, details = __doc__.split("\n\n", 1)
    p = argparse.ArgumentParser(description=description, epilog=details,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shards", nargs="+", help="tar shards, brace patterns allowed ('DIR/s-{000000..000003}.tar')")
    p.add_argument("--val", action="store_true", help="validation transforms (Resize + CenterCrop)")
    p.add_argument("--workers", type=int, default=4, help="DataLoader worker processes")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--limit", type=int, default=0, help="batches per epoch (0: all)")
    p.add_argument("--shuffle", type=int, default=0, help="shuffle buffer per worker, in samples (0: none)")
    p.add_argument("--shared-collate", action="store_true",
                   help="collate_fn=tensorcom.collate.SharedRingCollate(): batches through reused shared memory")
    p.add_argument("--torchvision", action="store_true", help="PIL and torchvision's transforms, to compare")
    return p.parse_args()


def main():
    args = parse_args()
    shards = [path for pattern in args.shards for path in expand_braces(pattern)]
    missing = [path for path in shards if not os.path.exists(path)]
    if missing:
        raise SystemExit(f"no such shard: {missing[0]}" + (f" (and {len(missing) - 1} more)" if missing[1:] else ""))
    if len(shards) < args.workers:
        print(f"warning: {len(shards)} shards for {args.workers} workers: {args.workers - len(shards)} will idle")
    transform = TorchvisionTransform(args.val) if args.torchvision else tensorcom_transform(args.val)
    dataset = ShardDataset(shards, transform, shuffle=0 if args.val else args.shuffle)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers,
                        pin_memory=device.type == "cuda", collate_fn=collate_fn(args.shared_collate))
    normalize = Normalize(device)
    which = "torchvision (PIL)" if args.torchvision else "tensorcom.imaging"
    print(f"{len(shards)} shards; {which} {'validation' if args.val else 'training'} transforms, "
          f"{args.workers} workers, batches of {args.batch_size}, normalised on {device}")
    for epoch in range(args.epochs):
        dataset.set_epoch(epoch)
        run_epoch(epoch, loader, normalize, args.limit)


if __name__ == "__main__":
    main()
