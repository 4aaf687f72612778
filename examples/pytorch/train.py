#!/usr/bin/env python3
"""Trains a torchvision ResNet from tensorcom servers, an ImageFolder or
synthetic data, and says where the time goes.

Two ways to run it:

  timing (default)  each --data in turn, with a fresh model, for --steps
                    timed steps after --warmup untimed ones; a table
                    compares the inputs' images/s
  --epochs N        training on one --data: N epochs of --epoch-size steps,
                    each followed by an evaluation on --val (loss and
                    accuracy) and a checkpoint (--checkpoint PATH, written
                    atomically; --resume continues where it stopped)

Inputs:

    --data tensorcom:URLS   batches from tensorcom servers (URLs brace-expanded,
                            several separated by spaces), e.g.
                            tensorcom:zsub://127.0.0.1:788{0..3}
    --data folder:DIR       an ImageFolder through a PyTorch DataLoader
                            (RandomResizedCrop, flip; --workers processes)
    --data synthetic        one random batch already on the device: the model's
                            own speed, the ceiling for the others

Data-parallel ranks: with --rank and --world (by default RANK and
WORLD_SIZE, as torchrun and examples/slurm set them), a tensorcom input
connects only to this rank's share of its servers (tensorcom.rank_urls:
every world-th URL from rank on), so that no sample reaches two ranks;
--val is not shared out (serve it over PUB: every rank sees all of it).
See docs/deploy.md. Launched by torchrun (MASTER_ADDR set) with more than
one rank, it trains data-parallel: a process group (gloo on CPU, nccl on
GPUs, each rank on cuda:LOCAL_RANK), the model in DistributedDataParallel,
an epoch as long on every rank (the shortest input's), every rank stopping
at the same step on a signal, and one data token for all ranks (gathered
and merged into PATH.data.json at each checkpoint).

--batch-size sets the batches of folder and synthetic; tensorcom input is
re-batched to it (its servers' batches split or joined, the rest kept for
the next step: every sample is used once, in the order it came). Without
it, tensorcom batches are used as the servers send them. Their image size is
the servers': with --size-schedule (progressive resizing) it grows between
epochs; the model takes any size, batches are never joined across a size
change (the last of the old size goes out short), and the new size is said.

Progress: on a terminal, a bar with the rate and the time left (tqdm, if
installed); otherwise a line every --report steps. Both give the share of
the time spent waiting for data (tensorcom: the Connection's own measure of
time blocked in recv; folder: time spent waiting on the DataLoader).

Checkpoints and signals: --checkpoint PATH holds the model, the optimizer,
the last finished epoch, the steps done of the next one and, for tensorcom
input, the data token (Connection.state_dict(): the server batches wholly
trained on; servers need --meta). Beside it goes the token alone, as JSON
for the servers' --resume: PATH.data.json, or PATH.data-rank{R}.json for
each rank when --world is above 1 (each rank writes its own; the job joins
them with `python3 -m tensorcom.resume merge`; only rank 0 writes the
model). SIGTERM or SIGUSR1 (Slurm's warning signal) ends training after
the current step: the checkpoint is written mid-epoch and the program exits
with status 128 + the signal's number. --resume restores the model, the
epoch and the step, loads the token into the Connection (the token file if
there is one: what the servers were resumed from) and trains the rest of
that epoch, then the following ones. A server batch partly used by
re-batching when the checkpoint was taken is left out of the token: it is
served and trained on again after a resume, never lost.

Recipes: the training flags of torchvision's references/classification
train.py, of timm's train.py or of FFCV's train_imagenet.py (its config
keys as --section.key flags), one script's at a time, with that script's
defaults (tensorcom.reference_flags): the optimiser (SGD, AdamW, RMSprop,
LAMB) and its weight-decay groups, the learning-rate schedule with its
warm-up, model EMA (evaluated beside the model), cross-entropy with label
smoothing or timm's BCE, FFCV's BlurPool and test-time flip. Their data
flags (crop sizes, policies, erasing, MixUp/CutMix, repeated augmentation)
are the servers': the flags that serve them are printed, and servers whose
--meta says otherwise are refused. --recipe NAME fills what the command
line leaves from a preset: torchvision-resnet50-v2, timm-rsb-a3 or
ffcv-rn50 (docs/recipes.md).

Every path hands the model uint8 images normalized on the device, with AMP
(float16 on CUDA, bfloat16 on CPU) and channels-last unless turned off.

    train.py --arch resnet50 --data tensorcom:zsub://127.0.0.1:7880 \\
        --data folder:/data/imagenet/train --workers 16 --data synthetic
    train.py --data tensorcom:zsub://127.0.0.1:7880 --batch-size 256 \\
        --epochs 90 --epoch-size 5004 --val tensorcom:zrpull://127.0.0.1:7890 \\
        --val-size 200 --checkpoint resnet50.pt --resume
    torchrun --nproc-per-node 8 train.py --recipe torchvision-resnet50-v2 \\
        --epochs 600 --data tensorcom:zpull://127.0.0.1:788{0..7} ...

From a build tree: PYTHONPATH=build/bindings examples/pytorch/train.py ...
Errors end the program with one line on stderr and exit status 1.
"""

import argparse
import contextlib
import datetime
import json
import os
import signal
import sys
import time

import torch
import torchvision

import recipe_training

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]

# --batch-size for folder and synthetic when none is given.
DEFAULT_BATCH_SIZE = 256


def parse_args(argv):
    description, details = __doc__.split("\n\n", 1)
    p = argparse.ArgumentParser(description=description, epilog=details,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", action="append", required=True,
                   help="tensorcom:URLS, folder:DIR or synthetic (repeatable when timing: each runs in turn)")
    p.add_argument("--arch", "--model", choices=["resnet18", "resnet50"], default="resnet50")
    p.add_argument("--steps", type=int, default=100, help="timing: timed steps per --data")
    p.add_argument("--warmup", type=int, default=10, help="timing: untimed steps before them")
    p.add_argument("--batch-size", type=int,
                   help=f"images a step (folder, synthetic: default {DEFAULT_BATCH_SIZE}; "
                        "tensorcom: re-batched to it, default the servers' batches)")
    p.add_argument("--epochs", type=int, help="train for this many epochs (instead of timing)")
    p.add_argument("--epoch-size", type=int,
                   help="steps an epoch (default: tensorcom: the Connection's epoch, len(); "
                        "folder: one pass; synthetic: --steps)")
    p.add_argument("--val", help="evaluate after each epoch on this tensorcom stream (tensorcom:URLS or URLS)")
    p.add_argument("--val-size", type=int, help="batches of --val an evaluation takes (required with --val)")
    p.add_argument("--checkpoint", metavar="PATH",
                   help="save model, optimizer and data token here after each epoch and on SIGTERM/SIGUSR1")
    p.add_argument("--resume", action="store_true", help="continue where --checkpoint stopped (epoch and step)")
    p.add_argument("--image-size", type=int, default=224,
                   help="for folder and synthetic; tensorcom input comes at the servers' size (--size-schedule "
                        "changes it by epoch)")
    p.add_argument("--workers", type=int, default=8, help="DataLoader worker processes for folder")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--recipe", help="torchvision-resnet50-v2, timm-rsb-a3 or ffcv-rn50: its source's flags "
                                    "where the command line gives none (docs/recipes.md)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--no-amp", dest="amp", action="store_false", help="train in float32")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    p.add_argument("--rank", type=int, default=int(os.environ.get("RANK", 0)),
                   help="this data-parallel rank: tensorcom inputs keep its share of the URLs (default $RANK or 0)")
    p.add_argument("--world", type=int, default=int(os.environ.get("WORLD_SIZE", 1)),
                   help="data-parallel ranks in all (default $WORLD_SIZE or 1)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a tensorcom batch")
    p.add_argument("--curve-secret", metavar="FILE",
                   help="tensorcom: this trainer's CURVE secret certificate (tenbin keygen; docs/security.md)")
    p.add_argument("--curve-server", metavar="FILE", help="tensorcom: the servers' public CURVE certificate")
    p.add_argument("--report", type=int, default=20,
                   help="progress every N steps: a line, or on a terminal the bar's loss and waiting (0: never)")
    from tensorcom import reference_flags
    reference_flags.add_to(p)
    args = p.parse_args(argv)
    if not 0 <= args.rank < args.world:
        p.error(f"--rank {args.rank} of --world {args.world}: expected 0 <= rank < world")
    apply_recipe(args, p)
    for data in args.data:
        if data != "synthetic" and not data.startswith(("tensorcom:", "folder:")):
            p.error(f"--data {data!r}: expected tensorcom:URLS, folder:DIR or synthetic")
    for name in ("batch_size", "epochs", "epoch_size", "val_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} {value}: must be at least 1")
    if args.epochs is None:
        given = [name for name in ("epoch_size", "val", "val_size", "checkpoint", "resume")
                 if getattr(args, name) not in (None, False)]
        if given:
            p.error(", ".join("--" + name.replace("_", "-") for name in given) + ": only with --epochs")
    else:
        if len(args.data) > 1:
            p.error("--epochs trains on one --data (several are for timing)")
        if args.val is not None and args.val.startswith(("folder:", "synthetic")):
            p.error(f"--val {args.val!r}: expected a tensorcom stream (tensorcom:URLS or URLS)")
        if args.val is not None and args.val_size is None:
            p.error("--val needs --val-size, the batches an evaluation takes: a stream has no end")
        if args.resume and args.checkpoint is None:
            p.error("--resume needs --checkpoint PATH")
    return args


def say(line):
    print(f"train: {line}", flush=True)


def apply_recipe(args, parser):
    """The settings (args.settings): the torchvision, timm or FFCV flags
    given, then --recipe's (tensorcom.recipes), then their script's
    defaults. args.served_check names what the servers must serve: the
    recipe, or the data flags given; None when neither was given (any
    servers will do)."""
    from tensorcom import recipes, reference_flags
    preset = None
    if args.recipe is not None:
        try:
            args.recipe = recipes.get(args.recipe)
        except ValueError as e:
            parser.error(f"--recipe: {e}")
        preset = args.recipe.settings
    try:
        settings = reference_flags.resolve(args, preset)
    except ValueError as e:
        parser.error(str(e))
    if args.batch_size is None:
        args.batch_size = settings.batch_size
    args.settings = settings
    args.lr, args.label_smoothing = settings.lr, settings.label_smoothing
    args.test_time_flip = bool(settings.test_time_flip)
    data_given = reference_flags.data_flags_given(args)
    args.served_check = (f"recipe {args.recipe.name}" if args.recipe is not None
                         else f"the data flags given ({', '.join(data_given)})" if data_given else None)
    if args.served_check is not None:
        try:
            reference_flags.server_args(settings, "train")
        except ValueError as e:
            parser.error(str(e))


def say_settings(args):
    """The settings in their script's flags, the recipe's source if one was
    named, and the servers' flags that serve them."""
    from tensorcom import reference_flags
    recipe, settings = args.recipe, args.settings
    indent = ""
    if recipe is not None:
        say(f"recipe {recipe.name}: {recipe.source}")
        say(f"  its source: {recipe.command}")
        indent = "  "
    say(f"{indent}settings ({settings.script}'s flags): {reference_flags.describe(settings)}")
    for split, name in (("train", "training"), ("val", "validation")):
        try:
            flags = " ".join(reference_flags.server_args(settings, split)) + " --meta"
        except ValueError as e:
            flags = f"none: {e}"
        say(f"{indent}{name} servers: serve-imagenet-shards {flags}")


def check_served_recipe(args, batch, infos, split):
    """Refuses servers whose --meta recipe differs from the settings' server
    flags (or that send no --meta)."""
    from tensorcom import recipes, reference_flags
    if "meta" not in infos:
        raise ValueError(f"{args.served_check}: the servers send no --meta, so what they serve cannot be checked")
    import msgpack
    last_meta = max(i for i, info in enumerate(infos) if info == "meta")
    meta = msgpack.unpackb(bytes(batch[last_meta].cpu().numpy()), raw=False)
    wanted = reference_flags.server_args(args.settings, split)
    recipes.check_served(wanted, recipes.served_flags(meta), args.served_check)


# --- input paths: each gives (images, labels) on the device --------------------------

# How often the trainer says it is still waiting for its first batch.
WAIT_NOTICE_S = 5.0


class Rebatcher:
    """Batches of exactly batch_size from a function giving batches of any
    size: larger ones are split, smaller ones joined, and what is left waits
    for the next call, so every sample is handed out once, in order. Images
    of different sizes are never joined: when the size changes (a server's
    --size-schedule at an epoch's start), what is left of the old size is
    handed out as a short batch."""

    def __init__(self, next_batch, batch_size, settled=None):
        self.next_batch = next_batch  # () -> (images, labels)
        self.batch_size = batch_size
        # Called when every sample received so far is in the batch being made
        # or one handed out: just before each receive, and when a batch
        # handed out leaves nothing behind.
        self.settled = settled
        self.pending = []  # (images, labels) received and not yet handed out, all of one image size
        self.pending_count = 0
        self.held = None  # a received batch of a new size, waiting until pending is handed out

    def _receive(self):
        """Adds the next batch to pending; False (keeping it aside) if its images' size differs."""
        if self.held is not None:
            images, labels = self.held
        else:
            if self.settled is not None:
                self.settled()
            images, labels = self.next_batch()
        self.held = None
        if self.pending and images.shape[1:] != self.pending[0][0].shape[1:]:
            self.held = (images, labels)
            return False
        self.pending.append((images, labels))
        self.pending_count += images.shape[0]
        return True

    def __call__(self):
        while self.pending_count < self.batch_size and self._receive():
            pass
        if len(self.pending) == 1:  # views, no copy
            images, labels = self.pending[0]
        else:
            images = torch.cat([p[0] for p in self.pending])
            labels = torch.cat([p[1] for p in self.pending])
        n = min(self.batch_size, self.pending_count)
        self.pending = [(images[n:], labels[n:])] if images.shape[0] > n else []
        self.pending_count -= n
        if not self.pending and self.held is None and self.settled is not None:
            self.settled()
        return images[:n], labels[:n]


class TensorcomBatches:
    """Batches from tensorcom servers, re-batched to batch_size unless None;
    blocked_seconds() is the time spent waiting for them (the Connection's own
    measure), for the starvation figure."""

    def __init__(self, urls, args, device, batch_size=None, split=True):
        import tensorcom
        converter = "torch_cuda" if device.type == "cuda" else "torch"
        self.urls = urls
        self.classes = args.classes
        self.args, self.split = args, split
        self.timeout = args.timeout
        # Training data is shared out among ranks; evaluation (split False)
        # is every rank's, from PUB servers (docs/deploy.md).
        mine = tensorcom.rank_urls(urls.split(), args.rank, args.world) if split else urls.split()
        curve = {k: v for k, v in (("curve_secret", args.curve_secret), ("curve_server", args.curve_server)) if v}
        self.connection = tensorcom.Connection(mine, converters=converter, timeout=args.timeout, **curve)
        self.first = True
        self.image_shape = None  # the images' shape past the batch dimension, to say when it changes
        self.batch_size = batch_size
        self.next_batch = (self._received if batch_size is None
                           else Rebatcher(self._received, batch_size, settled=self._snapshot))
        self.trained_token = None  # re-batching: the token of the batches wholly in the steps made so far

    def __next__(self):
        return self.next_batch()

    def _snapshot(self):
        self.trained_token = self._token()

    def _token(self):
        """The Connection's token, or None where the servers send no --meta."""
        import tensorcom
        try:
            return self.connection.state_dict()
        except tensorcom.ArgumentError:
            return None

    def data_state(self):
        """The token of the server batches wholly trained on once the steps
        handed out so far are done (None without --meta). Re-batching, a
        received batch may be partly used: the token is the last one taken
        when every sample received had gone into a step (Rebatcher's settled)."""
        now = self._token()
        if self.batch_size is None or now is None:
            return now
        return self.trained_token

    def load_data_state(self, token):
        """Takes a token (Connection.load_state_dict): what it lists must not come again."""
        self.connection.load_state_dict(token)
        self.trained_token = token

    def _received(self):
        batch, infos = self._first_batch() if self.first else self.connection.recv(infos=True)
        if self.first and self.args.served_check is not None:
            check_served_recipe(self.args, batch, infos, "train" if self.split else "val")
        if self.first:
            rebatched = "" if self.batch_size in (None, batch[0].shape[0]) else f", re-batched to {self.batch_size}"
            mixed = ", mixed by the servers (soft targets)" if "mix" in infos else ""
            say(f"{self.urls}: batches of {batch[0].shape[0]}{rebatched}{mixed}")
        self.first = False
        self._say_image_size(batch[0])
        return batch[0], self._targets(batch, infos)  # the rest, if any, is metadata

    def _targets(self, batch, infos):
        """The labels; for batches the servers mixed (--mixup-alpha,
        --cutmix-alpha) the soft targets of their draws."""
        if "mix" not in infos:
            return batch[1]
        from tensorcom import imaging
        labels = batch[1]
        targets = imaging.mix_targets(labels.cpu(), batch[infos.index("mix")].cpu(), self.classes,
                                      self.args.label_smoothing)
        return torch.from_numpy(targets).to(labels.device, non_blocking=True)

    def _say_image_size(self, images):
        """Says the images' size at the start and whenever it changes (servers with --size-schedule)."""
        shape = tuple(images.shape[1:])
        if shape != self.image_shape:
            was = "" if self.image_shape is None else f" (was {self.image_shape})"
            say(f"{self.urls}: images of shape {shape}{was}")
            self.image_shape = shape

    def _first_batch(self):
        """Waits as recv() does, saying what for and how long so far."""
        import tensorcom
        start = time.monotonic()
        while True:
            left = self.timeout - (time.monotonic() - start)
            batch = self.connection.recv(timeout=min(WAIT_NOTICE_S, max(left, 0)), infos=True)
            if batch is not None:
                return batch
            waited = time.monotonic() - start
            if waited >= self.timeout:
                raise tensorcom.TimeoutError(f"no batch from {self.urls} in {self.timeout:g} s")
            say(f"waiting for a batch from {self.urls} ({waited:.0f} s of {self.timeout:g})")

    def steps_per_epoch(self):
        return len(self.connection)

    def blocked_seconds(self):
        return self.connection.stats.blocked_seconds

    def close(self):
        self.connection.close()


class GeneratorBatches:
    """Another input path's generator; the time spent in it is the time
    waiting for data."""

    def __init__(self, generator, steps_per_epoch):
        self.generator = generator
        self.steps = steps_per_epoch
        self.blocked = 0.0

    def __next__(self):
        start = time.perf_counter()
        try:
            return next(self.generator)
        finally:
            self.blocked += time.perf_counter() - start

    def steps_per_epoch(self):
        return self.steps

    def blocked_seconds(self):
        return self.blocked

    def data_state(self):
        return None  # no token: these inputs are not resumable mid-epoch

    def close(self):
        self.generator.close()


def folder_loader(root, args, device):
    import torchvision.transforms as T
    transform = T.Compose([T.RandomResizedCrop(args.image_size), T.RandomHorizontalFlip(), T.PILToTensor()])
    dataset = torchvision.datasets.ImageFolder(root, transform)
    return torch.utils.data.DataLoader(dataset, batch_size=args.batch_size or DEFAULT_BATCH_SIZE, shuffle=True,
                                       drop_last=True, num_workers=args.workers,
                                       pin_memory=device.type == "cuda", persistent_workers=args.workers > 0)


def folder_batches(loader, device):
    while True:
        for images, labels in loader:
            yield images.to(device, non_blocking=True), labels.to(device, non_blocking=True)


def synthetic_batches(args, device):
    size = args.batch_size or DEFAULT_BATCH_SIZE
    images = torch.randint(0, 256, (size, 3, args.image_size, args.image_size), dtype=torch.uint8, device=device)
    labels = torch.randint(0, args.classes, (size,), device=device)
    while True:
        yield images, labels


def batches(data, args, device):
    if data.startswith("tensorcom:"):
        return TensorcomBatches(data[len("tensorcom:"):], args, device, args.batch_size)
    if data.startswith("folder:"):
        loader = folder_loader(data[len("folder:"):], args, device)
        return GeneratorBatches(folder_batches(loader, device), len(loader))
    return GeneratorBatches(synthetic_batches(args, device), args.steps)


def waiting_share(blocked, seconds):
    """', waiting for data N%': the share of `seconds` blocked (empty when unknown)."""
    if seconds <= 0:
        return ""
    return f", waiting for data {100 * blocked / seconds:.0f}%"


# --- progress -------------------------------------------------------------------------

def progress_bar(label, total, first):
    """A tqdm bar counting images on stdout, starting at `first` (the first
    step's, left out of the rate: the bar starts when it is done), or None
    when stdout is not a terminal or tqdm is not installed (then Progress
    prints lines)."""
    if not sys.stdout.isatty():
        return None
    try:
        import tqdm
    except ImportError:
        return None
    return tqdm.tqdm(total=total, initial=first, desc=f"train: {label}", unit="img", file=sys.stdout,
                     dynamic_ncols=True)


class Progress:
    """The progress of `steps` steps on one source: a bar (images/s, time
    left) on a terminal, else a line every `every` steps; both with the loss
    and the share of the interval spent waiting for data."""

    def __init__(self, label, steps, every, source, device):
        self.label, self.steps, self.every = label, steps, every
        self.source, self.device = source, device
        self.bar = None  # made at the first step: the first batch gives its size
        self.done = self.images = 0
        synchronize(device)
        self.start = self.interval_start = time.perf_counter()
        self.blocked_start = self.blocked_interval = source.blocked_seconds()

    def step(self, images, loss):
        """Counts one step of `images` images; `loss` (a tensor) is read only when reported."""
        self.done += 1
        self.images += images
        if self.done == 1:
            self.bar = progress_bar(self.label, self.steps * images, images)
        elif self.bar is not None:
            self.bar.update(images)
        if self.every > 0 and self.done % self.every == 0 and self.done < self.steps:
            self.report(loss)

    def report(self, loss):
        synchronize(self.device)
        now = time.perf_counter()
        blocked = self.source.blocked_seconds()
        waiting = waiting_share(blocked - self.blocked_interval, now - self.interval_start)
        if self.bar is not None:
            self.bar.set_postfix_str(f"loss {loss.item():.3f}{waiting}")
        else:
            rate = self.images / (now - self.start)
            left = (self.steps - self.done) * (now - self.start) / self.done
            say(f"{self.label} step {self.done}/{self.steps} loss {loss.item():.3f} {rate:.1f} images/s{waiting}, "
                f"{datetime.timedelta(seconds=round(left))} left")
        self.interval_start, self.blocked_interval = now, blocked

    def finish(self):
        """Returns (images, seconds, waiting) of all the steps; closes the bar."""
        synchronize(self.device)
        seconds = time.perf_counter() - self.start
        if self.bar is not None:
            self.bar.close()
        return self.images, seconds, waiting_share(self.source.blocked_seconds() - self.blocked_start, seconds)


# --- the model --------------------------------------------------------------------------

def grad_scaler(enabled):
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


class Trainer:
    """The model, its optimiser, schedule, EMA and loss as args.settings
    has them (recipe_training.py), stepped under AMP."""

    def __init__(self, args, device, group=None):
        self.device = device
        self.arch, self.classes = args.arch, args.classes
        self.settings, self.epochs = args.settings, args.epochs
        self.memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
        self.model = getattr(torchvision.models, args.arch)(num_classes=args.classes)
        if self.settings.blurpool:
            recipe_training.add_blurpool(self.model)
        self.model = self.model.to(device, memory_format=self.memory_format).train()
        self.module = self.model  # what checkpoints hold: the model without its DDP wrapper
        if group is not None:
            self.model = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=[device.index] if device.type == "cuda" else None)
        self.optimizer = recipe_training.make_optimizer(self.module, self.settings)
        self.loss = recipe_training.RecipeLoss(self.settings, args.classes)
        self.ema = None
        if self.settings.model_ema and self.epochs is not None:
            batch = args.batch_size or self.settings.batch_size or DEFAULT_BATCH_SIZE
            self.ema = recipe_training.ModelEma(self.module, self.settings, args.world, batch, self.epochs)
        self.epoch = self.step_in_epoch = 0
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
        y = labels.to(self.device, non_blocking=True)
        return x, (y.float() if y.is_floating_point() else y.long())  # soft targets of mixed batches, or labels

    def forward(self, images, labels):
        """(logits, loss) under autocast."""
        x, y = self.prepare(images, labels)
        with torch.autocast(device_type=self.device.type, dtype=self.amp_dtype, enabled=self.amp):
            logits = self.model(x)
            return logits, self.loss(logits, y)

    def at(self, epoch, step, steps):
        """Sets the learning rate of step `step` (from 0) of `steps` in epoch
        `epoch` (from 0); timing runs (no --epochs) keep the base rate."""
        self.epoch, self.step_in_epoch = epoch, step
        if self.epochs is None:
            return
        lr = recipe_training.learning_rate(self.settings, self.epochs, epoch, step, steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def learning_rate(self):
        return self.optimizer.param_groups[0]["lr"]

    def step(self, images, labels):
        _, loss = self.forward(images, labels)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if self.settings.clip_grad:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.clip_grad)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.ema is not None:
            self.ema.after_step(self.module, self.epoch, self.step_in_epoch)
        self.step_in_epoch += 1
        return loss

    def ema_forward(self, images, labels):
        """(logits, loss) of the EMA weights."""
        x, y = self.prepare(images, labels)
        with torch.autocast(device_type=self.device.type, dtype=self.amp_dtype, enabled=self.amp):
            logits = self.ema.model(x)
            return logits, self.loss(logits, y)

    def state(self, epoch, step=0, data=None):
        """The checkpoint: `epoch` the last finished, `step` the steps done of
        the next, `data` the input's token (None: not tensorcom, or no --meta)."""
        return {"epoch": epoch, "step": step, "data": data, "arch": self.arch, "classes": self.classes,
                "model": self.module.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scaler": self.scaler.state_dict(), "ema": None if self.ema is None else self.ema.state_dict()}

    def load_state(self, state, path):
        """Loads state() from the checkpoint at path; returns its epoch (its
        step and token are read by resume())."""
        if (state["arch"], state["classes"]) != (self.arch, self.classes):
            raise ValueError(f"{path} holds a {state['arch']} with {state['classes']} classes, not a "
                             f"{self.arch} with {self.classes}")
        self.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        if self.ema is not None and state.get("ema") is not None:
            self.ema.load_state_dict(state["ema"])
        return state["epoch"]


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --- timing ---------------------------------------------------------------------------

def time_input(data, args, device):
    """Trains on one input path; returns (images, seconds, waiting) of the timed steps."""
    trainer = Trainer(args, device)
    source = batches(data, args, device)
    try:
        for _ in range(args.warmup):
            trainer.step(*next(source))
        progress = Progress(data, args.steps, args.report, source, device)
        for _ in range(args.steps):
            images, labels = next(source)
            progress.step(images.shape[0], trainer.step(images, labels))
        return progress.finish()
    finally:
        source.close()


def time_inputs(args, device):
    say(f"{args.warmup} warm-up + {args.steps} timed steps per input")
    results = []
    for data in args.data:
        images, seconds, waiting = time_input(data, args, device)
        rate = images / seconds if seconds > 0 else 0.0
        results.append((data, rate))
        say(f"{data}: {images} images in {seconds:.2f} s, {rate:.1f} images/s{waiting}")
    if len(results) > 1:
        width = max(len(data) for data, _ in results)
        print(f"{'input':<{width}}  images/s")
        for data, rate in results:
            print(f"{data:<{width}}  {rate:9.1f}")


# --- training -------------------------------------------------------------------------

def save_checkpoint(path, state):
    """Writes state to path atomically (tensorcom.atomic: a crash or a kill
    leaves the old file or the new, never a part)."""
    from tensorcom.atomic import atomic_writer
    with atomic_writer(path) as f:
        torch.save(state, f)


def save_json(path, value):
    """Writes value as JSON to path atomically (tensorcom.atomic)."""
    from tensorcom.atomic import atomic_write
    atomic_write(path, json.dumps(value, separators=(",", ":")) + "\n")


def data_token_path(args, group=None):
    """The JSON token file beside --checkpoint: PATH.data.json (one process,
    or every rank's merged under a process group), or PATH.data-rank{R}.json
    when ranks without one write one each."""
    if args.world == 1 or group is not None:
        return f"{args.checkpoint}.data.json"
    return f"{args.checkpoint}.data-rank{args.rank}.json"


def writes_model(args):
    """Rank 0 writes the model, as under DDP (the ranks' models are the same);
    every rank writes its data token."""
    return args.rank == 0


class Start:
    """Where training starts: after `epoch` finished epochs, `step` steps into
    the next; `data` the token to load into a tensorcom input (or None)."""

    def __init__(self, epoch=0, step=0, data=None, data_from=None):
        self.epoch, self.step, self.data, self.data_from = epoch, step, data, data_from


def resume(args, trainer, device, group=None):
    """Start(): the beginning, or with --resume where --checkpoint stopped."""
    if not args.resume:
        return Start()
    if not os.path.exists(args.checkpoint):
        say(f"no checkpoint at {args.checkpoint}: starting at epoch 1")
        return Start()
    # Tensors and plain values only, no code; torch 1.13's weights_only
    # unpickler rejects floats, so there it loads as torch.save wrote it.
    safe = {"weights_only": True} if int(torch.__version__.split(".")[0]) >= 2 else {}
    state = torch.load(args.checkpoint, map_location=device, **safe)
    epoch = trainer.load_state(state, args.checkpoint)
    step = state.get("step", 0)  # checkpoints before tokens have neither
    say(f"resumed from {args.checkpoint} after {progress_point(epoch, step)}")
    # The token file is what the servers were resumed from; the checkpoint's
    # copy (the same unless a crash came between the two writes) otherwise.
    path = data_token_path(args, group)
    if os.path.exists(path):
        with open(path) as f:
            return Start(epoch, step, json.load(f), path)
    data = state.get("data") if args.world == 1 or group is not None else None
    return Start(epoch, step, data, args.checkpoint if data is not None else None)


def progress_point(epoch, step):
    """'epoch E', or 'epoch E and S steps of epoch E+1'."""
    return f"epoch {epoch}" if step == 0 else f"epoch {epoch} and {step} steps of epoch {epoch + 1}"


def save_training(args, trainer, source, epoch, step, group=None):
    """The checkpoint (rank 0), then the token file: a crash between the two
    leaves a token behind the model, whose batches are trained on again,
    rather than one ahead of it, whose batches would be lost. Under a
    process group the ranks' tokens are gathered and rank 0 writes their
    union; without one each rank writes its own."""
    data = source.data_state()
    writes_token = data is not None
    if group is not None:
        from tensorcom.resume import merge_state_dicts
        tokens = [None] * args.world
        group.all_gather_object(tokens, data)
        present = [token for token in tokens if token is not None]
        data = merge_state_dicts(present) if present else None
        writes_token = data is not None and writes_model(args)
    if writes_model(args):
        save_checkpoint(args.checkpoint, trainer.state(epoch, step, data))
    if writes_token:
        save_json(data_token_path(args, group), data)
    files = [args.checkpoint] if writes_model(args) else []
    files += [data_token_path(args, group)] if writes_token else []
    say(f"saved {progress_point(epoch, step)} to {' and '.join(files) or 'nothing (rank without a token)'}")


class StopSignals:
    """SIGTERM and SIGUSR1 (Slurm's warning signal, --signal=USR1@N) ask
    training to stop once the current step is done: the handler only takes
    note, so a step is never cut short."""

    SIGNALS = (signal.SIGTERM, signal.SIGUSR1)

    def __init__(self):
        self.signum = None

    def install(self):
        for signum in self.SIGNALS:
            signal.signal(signum, self._note)

    def _note(self, signum, _frame):
        if self.signum is None:
            self.signum = signum

    def __bool__(self):
        return self.signum is not None

    def agreed(self, group=None, device=None):
        """Whether training stops now. Under a process group every rank
        calls this at the same step and all get the same answer (the signal
        any rank received), so that all stop at that step: a rank that
        stopped alone would leave the others waiting in DDP's all-reduce."""
        if group is None:
            return bool(self)
        flag = torch.tensor([self.signum or 0], device=device if device.type == "cuda" else "cpu")
        group.all_reduce(flag, op=group.ReduceOp.MAX)
        agreed = int(flag.item())
        # A signal that came during the all-reduce stays noted for the next
        # step: overwriting it with this step's answer would lose it.
        if agreed:
            self.signum = agreed
        return agreed != 0

    def name(self):
        return signal.Signals(self.signum).name


def train_epoch(trainer, source, label, steps, args, device, first_step=0, stop=None, group=None, epoch=0):
    """Steps first_step .. steps-1 of epoch `epoch` (from 0), or fewer if
    `stop` is set meanwhile (on any rank, under a process group); prints
    its line. Returns the steps done of the epoch."""
    progress = Progress(label, steps - first_step, args.report, source, device)
    total_loss = torch.zeros((), device=device)
    step = first_step
    trainer.at(epoch, step, steps)
    first_lr = trainer.learning_rate()
    while step < steps and not (stop is not None and stop.agreed(group, device)):
        images, labels = next(source)
        trainer.at(epoch, step, steps)
        loss = trainer.step(images, labels)
        total_loss += loss.detach().float()
        step += 1
        progress.step(images.shape[0], loss)
    images, seconds, waiting = progress.finish()
    done = step - first_step
    part = "" if (first_step, step) == (0, steps) else f" (steps {first_step + 1} to {step} of {steps})"
    if done:
        say(f"{label}: loss {total_loss.item() / done:.3f}, lr {first_lr:.4g}, {images} images in {seconds:.2f} s, "
            f"{images / seconds:.1f} images/s{waiting}{part}")
    return step


def evaluate(trainer, source, label, steps, args, device, ema=False):
    """Loss and accuracy of the trainer's model (or, with ema, its moving
    average) over `steps` batches of source; prints its line."""
    forward = trainer.ema_forward if ema else trainer.forward
    progress = Progress(label, steps, args.report, source, device)
    total_loss = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    with evaluation(trainer), torch.no_grad():
        for _ in range(steps):
            images, labels = next(source)
            logits, loss = forward(images, labels)
            if args.test_time_flip:  # FFCV's lr_tta: the mean of the image's and its mirror's logits
                logits = (logits + forward(images.flip(3), labels)[0]) / 2
            total_loss += loss.float() * labels.shape[0]
            correct += (logits.argmax(1) == labels.to(device).long()).sum()
            progress.step(images.shape[0], loss)
    images, seconds, waiting = progress.finish()
    say(f"{label}: loss {total_loss.item() / images:.3f}, accuracy {100 * correct.item() / images:.2f}% "
        f"({images} images in {seconds:.2f} s{waiting})")


@contextlib.contextmanager
def evaluation(trainer):
    """The model in eval mode for the block, in training mode after it."""
    trainer.model.eval()
    try:
        yield
    finally:
        trainer.model.train()


def train(args, device):
    """Trains --epochs epochs; returns the exit status (128 + a signal's
    number when SIGTERM or SIGUSR1 stopped it)."""
    data = args.data[0]
    group = start_process_group(args, device)
    trainer = Trainer(args, device, group)
    start = resume(args, trainer, device, group)
    if start.epoch >= args.epochs:
        say(f"{args.checkpoint} already holds epoch {start.epoch} of {args.epochs}: nothing to do")
        return 0
    stop = StopSignals()
    stop.install()
    source = batches(data, args, device)
    val = None
    try:
        if start.data is not None and isinstance(source, TensorcomBatches):
            source.load_data_state(start.data)
            say(f"data token loaded from {start.data_from}")
        if args.val is not None:
            urls = args.val[len("tensorcom:"):] if args.val.startswith("tensorcom:") else args.val
            val = TensorcomBatches(urls, args, device, split=False)
        steps = args.epoch_size or equal_steps(source.steps_per_epoch(), group)
        whose = "" if args.epoch_size else " (the input's epoch; --epoch-size sets it)"
        say(f"{data}: epochs {start.epoch + 1} to {args.epochs}, {steps} steps each{whose}")
        first_step = start.step
        for epoch in range(start.epoch + 1, args.epochs + 1):
            label = f"epoch {epoch}/{args.epochs}"
            done = train_epoch(trainer, source, label, steps, args, device, first_step, stop, group, epoch - 1)
            first_step = 0
            if done < steps:  # stopped by a signal
                return stopped(args, trainer, source, stop, epoch - 1, done, group=group)
            if val is not None:
                evaluate(trainer, val, f"{label} val", args.val_size, args, device)
                if trainer.ema is not None:
                    evaluate(trainer, val, f"{label} val EMA", args.val_size, args, device, ema=True)
            if args.checkpoint is not None:
                save_training(args, trainer, source, epoch, 0, group)
            if stop.agreed(group, device) and epoch < args.epochs:
                return stopped(args, trainer, source, stop, epoch, 0, saved=True, group=group)
        return 0
    finally:
        source.close()
        if val is not None:
            val.close()
        if group is not None:
            group.destroy_process_group()


def start_process_group(args, device):
    """torch.distributed with its process group when torchrun (or another
    launcher that sets MASTER_ADDR) started more than one rank: gloo on
    CPU, nccl on GPUs. None otherwise: ranks given by hand only share the
    servers out."""
    if args.world <= 1 or "MASTER_ADDR" not in os.environ:
        return None
    import torch.distributed as dist
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=args.rank, world_size=args.world)
    say(f"rank {args.rank} of {args.world}: process group ({dist.get_backend()}), DistributedDataParallel")
    return dist


def equal_steps(steps, group):
    """An epoch's steps, the fewest any rank's input has under a process
    group: ranks that disagreed would hang in DDP's all-reduce."""
    if group is None:
        return steps
    fewest = torch.tensor([steps], device="cuda" if group.get_backend() == "nccl" else "cpu")
    group.all_reduce(fewest, op=group.ReduceOp.MIN)
    if int(fewest) != steps:
        say(f"this rank's input has {steps} steps an epoch, another's {int(fewest)}: every rank takes {int(fewest)}")
    return int(fewest)


def stopped(args, trainer, source, stop, epoch, step, saved=False, group=None):
    """After a stop signal: the checkpoint (unless just saved), one line, the exit status."""
    if args.checkpoint is not None and not saved:
        save_training(args, trainer, source, epoch, step, group)
    status = 128 + stop.signum
    kept = "checkpoint saved" if args.checkpoint is not None else "no --checkpoint: nothing saved"
    say(f"{stop.name()}: stopped after {progress_point(epoch, step)} ({kept}); exit status {status}")
    return status


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None and "LOCAL_RANK" in os.environ:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))  # torchrun: one GPU a rank
        torch.cuda.set_device(device)
    if args.channels_last and device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    amp = ("float16" if device.type == "cuda" else "bfloat16") if args.amp else "off"
    say(f"{args.arch} on {device}, amp {amp}, channels-last {args.channels_last}")
    if args.recipe is not None or args.served_check is not None or args.epochs is not None:
        say_settings(args)
    if args.epochs is None:
        time_inputs(args, device)
        return 0
    return train(args, device)


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
