#!/usr/bin/env python3
"""Trains a torchvision ResNet and prints images/s, to compare input paths on
one machine in one run. Each --data runs in turn, with a fresh model, for
--steps timed steps after --warmup untimed ones; a table compares them.

    --data tensorcom:URLS   batches from tensorcom servers (URLs brace-expanded,
                            several separated by spaces), e.g.
                            tensorcom:zsub://127.0.0.1:788{0..3}
    --data folder:DIR       an ImageFolder through a PyTorch DataLoader
                            (RandomResizedCrop, flip; --workers processes)
    --data synthetic        one random batch already on the device: the model's
                            own speed, the ceiling for the others

Every path hands the model uint8 images normalized on the device, with AMP
(float16 on CUDA, bfloat16 on CPU) and channels-last unless turned off.

    train.py --arch resnet50 --data tensorcom:zsub://127.0.0.1:7880 \\
        --data folder:/data/imagenet/train --workers 16 --data synthetic

From a build tree: PYTHONPATH=build/bindings examples/pytorch/train.py ...
"""

import argparse
import sys
import time

import torch
import torchvision

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", action="append", required=True,
                   help="tensorcom:URLS, folder:DIR or synthetic (repeatable: each runs in turn)")
    p.add_argument("--arch", choices=["resnet18", "resnet50"], default="resnet50")
    p.add_argument("--steps", type=int, default=100, help="timed steps per --data")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps before them")
    p.add_argument("--batch-size", type=int, default=256, help="for folder and synthetic (tensorcom: the server's)")
    p.add_argument("--image-size", type=int, default=224, help="for folder and synthetic")
    p.add_argument("--workers", type=int, default=8, help="DataLoader worker processes for folder")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--no-amp", dest="amp", action="store_false", help="train in float32")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a tensorcom batch")
    p.add_argument("--report", type=int, default=20, help="print a line every N steps (0: never)")
    args = p.parse_args(argv)
    for data in args.data:
        if data != "synthetic" and not data.startswith(("tensorcom:", "folder:")):
            p.error(f"--data {data!r}: expected tensorcom:URLS, folder:DIR or synthetic")
    return args


# --- input paths: each yields (images, labels) on the device -------------------------

# How often the trainer says it is still waiting for its first batch.
WAIT_NOTICE_S = 5.0


class TensorcomBatches:
    """Batches from tensorcom servers; blocked_seconds() is the time spent
    waiting for them (the Connection's own measure), for the starvation figure."""

    def __init__(self, urls, args, device):
        import tensorcom
        converter = "torch_cuda" if device.type == "cuda" else "torch"
        self.urls = urls
        self.timeout = args.timeout
        self.connection = tensorcom.Connection(urls.split(), converters=converter, timeout=args.timeout)
        self.first = True

    def __next__(self):
        batch = self._first_batch() if self.first else self.connection.recv()
        self.first = False
        return batch[0], batch[1]  # a third tensor, if any, is metadata

    def _first_batch(self):
        """Waits as recv() does, saying what for and how long so far."""
        import tensorcom
        start = time.monotonic()
        while True:
            waited = time.monotonic() - start
            left = self.timeout - waited
            if left <= 0:
                raise tensorcom.TimeoutError(f"no batch from {self.urls} in {self.timeout:g} s")
            batch = self.connection.recv(timeout=min(WAIT_NOTICE_S, left))
            if batch is not None:
                return batch
            print(f"train: waiting for a batch from {self.urls} ({time.monotonic() - start:.0f} s of "
                  f"{self.timeout:g})", flush=True)

    def blocked_seconds(self):
        return self.connection.stats.blocked_seconds

    def close(self):
        self.connection.close()


class GeneratorBatches:
    """Another input path's generator, with no measure of waiting."""

    def __init__(self, generator):
        self.generator = generator

    def __next__(self):
        return next(self.generator)

    def blocked_seconds(self):
        return None

    def close(self):
        self.generator.close()


def folder_batches(root, args, device):
    import torchvision.transforms as T
    transform = T.Compose([T.RandomResizedCrop(args.image_size), T.RandomHorizontalFlip(), T.PILToTensor()])
    dataset = torchvision.datasets.ImageFolder(root, transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True,
                                         num_workers=args.workers, pin_memory=device.type == "cuda",
                                         persistent_workers=args.workers > 0)
    while True:
        for images, labels in loader:
            yield images.to(device, non_blocking=True), labels.to(device, non_blocking=True)


def synthetic_batches(args, device):
    images = torch.randint(0, 256, (args.batch_size, 3, args.image_size, args.image_size), dtype=torch.uint8,
                           device=device)
    labels = torch.randint(0, args.classes, (args.batch_size,), device=device)
    while True:
        yield images, labels


def batches(data, args, device):
    if data.startswith("tensorcom:"):
        return TensorcomBatches(data[len("tensorcom:"):], args, device)
    if data.startswith("folder:"):
        return GeneratorBatches(folder_batches(data[len("folder:"):], args, device))
    return GeneratorBatches(synthetic_batches(args, device))


def waiting_share(source, blocked_before, seconds):
    """', waiting for data N%': the share of `seconds` the source spent blocked
    since blocked_before (empty for sources that do not measure it)."""
    blocked = source.blocked_seconds()
    if blocked is None or seconds <= 0:
        return ""
    return f", waiting for data {100 * (blocked - blocked_before) / seconds:.0f}%"


# --- training -------------------------------------------------------------------------

def grad_scaler(enabled):
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


class Trainer:
    def __init__(self, args, device):
        self.device = device
        self.memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
        self.model = getattr(torchvision.models, args.arch)(num_classes=args.classes)
        self.model = self.model.to(device, memory_format=self.memory_format).train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
        self.loss = torch.nn.CrossEntropyLoss()
        self.amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
        self.amp = args.amp
        self.scaler = grad_scaler(args.amp and device.type == "cuda")
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def prepare(self, images, labels):
        x = images.to(self.device, non_blocking=True).contiguous(memory_format=self.memory_format)
        if x.dtype == torch.uint8:
            x = (x.float() - self.mean) / self.std
        else:
            x = x.float()
        return x, labels.to(self.device, non_blocking=True).long()

    def step(self, images, labels):
        x, y = self.prepare(images, labels)
        with torch.autocast(device_type=self.device.type, dtype=self.amp_dtype, enabled=self.amp):
            loss = self.loss(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(data, args, device):
    """Trains on one input path; returns (images, seconds) of the timed steps."""
    trainer = Trainer(args, device)
    source = batches(data, args, device)
    images_seen, start, loss = 0, None, None
    blocked_at_start = blocked_at_report = 0.0
    try:
        for step in range(args.warmup + args.steps):
            if step == args.warmup:
                synchronize(device)
                start = report_start = time.perf_counter()
                blocked_at_start = blocked_at_report = source.blocked_seconds() or 0.0
            images, labels = next(source)
            loss = trainer.step(images, labels)
            if step >= args.warmup:
                images_seen += images.shape[0]
                done = step - args.warmup + 1
                if args.report > 0 and done % args.report == 0:
                    synchronize(device)
                    now = time.perf_counter()
                    rate = images_seen / (now - start)
                    waiting = waiting_share(source, blocked_at_report, now - report_start)
                    print(f"train: {data} step {done} loss {loss.item():.3f} {rate:.1f} images/s{waiting}", flush=True)
                    report_start, blocked_at_report = now, source.blocked_seconds() or 0.0
        synchronize(device)
        seconds = time.perf_counter() - start
        return images_seen, seconds, waiting_share(source, blocked_at_start, seconds)
    finally:
        source.close()


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device)
    if args.channels_last and device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    amp = ("float16" if device.type == "cuda" else "bfloat16") if args.amp else "off"
    print(f"train: {args.arch} on {device}, amp {amp}, channels-last {args.channels_last}, "
          f"{args.warmup} warm-up + {args.steps} timed steps per input", flush=True)
    results = []
    for data in args.data:
        images, seconds, waiting = run(data, args, device)
        rate = images / seconds if seconds > 0 else 0.0
        results.append((data, images, seconds, rate))
        print(f"train: {data}: {images} images in {seconds:.2f} s, {rate:.1f} images/s{waiting}", flush=True)
    if len(results) > 1:
        width = max(len(r[0]) for r in results)
        print(f"{'input':<{width}}  images/s")
        for data, _, _, rate in results:
            print(f"{data:<{width}}  {rate:9.1f}")
    return 0


def main_reporting_errors():
    """main(), with failures as one line (no traceback) and exit status 1."""
    try:
        return main()
    except KeyboardInterrupt:
        print("train: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 -- the line names the error's type
        print(f"train: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main_reporting_errors())
