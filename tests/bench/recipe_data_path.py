#!/usr/bin/python3
"""The recipes' whole data paths, one core, on the same JPEGs, batches of
128, measured in one run:
  torchvision's ResNet-50 v2 recipe (RRC 176 + flip + TrivialAugmentWide +
  float + Normalize + RandomErasing(0.1), collated, then MixUp(0.2) or
  CutMix(1.0)):
    (t) torchvision as its reference script runs it, on PIL (v2's MixUp and
        CutMix restated in torch: torchvision here predates v2);
    (i) tensorcom.imaging's transforms in the same loop;
    (s) serve-imagenet-shards, one worker on one core (its consumer on the
        other): --size 176 --auto-augment ta_wide --random-erase 0.1
        --dtype float32 --layout BCHW --mixup-alpha 0.2 --cutmix-alpha 1.0,
        and (s0) without the mixing: its cost;
  timm's "ResNet strikes back" A3 (RRC 160 + flip + rand-m6-mstd0.5-inc1,
  uint8 fast collate, Mixup(0.1) / CutMix(1.0)):
    (T) timm's path restated with the Pillow calls its functions make (timm
        cannot be installed here: its op functions and FastCollateMixup's
        blend are reproduced from its source, as the tests' reference);
    (S) serve-imagenet-shards: --size 160 --aa rand-m6-mstd0.5-inc1
        --interpolation bicubic --mixup-alpha 0.1 --cutmix-alpha 1.0
        --mix-mode batch.
Ratios (s) / (t), (i) / (t) and (S) / (T): target >= 3. Each rate is the
best of --repeat runs, taken in turns; the machine is shared and noisy:
compare figures of one run only.

    tests/bench/recipe_data_path.py --shards 'DIR/photos-{000000..000003}.tar' [--build build] [--repeat 2]
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import augment_throughput as throughput  # noqa: E402  (shard_paths, count_images, server)

# The shards' JPEGs (paths from sys.argv[2:]) as `jpegs`; batches of 128.
PRELUDE = r"""
import io, math, os, sys, tarfile, time
import numpy as np, torch
torch.set_num_threads(1)
sys.path.insert(0, os.path.join(sys.argv[1], "bindings"))
jpegs = []
for path in sys.argv[2:]:
    with tarfile.open(path) as tar:
        jpegs += [tar.extractfile(m).read() for m in tar if m.name.lower().endswith((".jpg", ".jpeg"))]
BATCH = 128
batches = [jpegs[i:i + BATCH] for i in range(0, len(jpegs) - BATCH + 1, BATCH)]
labels = torch.arange(BATCH) % 1000
"""

TORCHVISION = PRELUDE + r"""
from PIL import Image
from torchvision import transforms as T
from torchvision.transforms import InterpolationMode
g = torch.Generator().manual_seed(0)
per_image = T.Compose([T.RandomResizedCrop(176, interpolation=InterpolationMode.BILINEAR), T.RandomHorizontalFlip(),
                       T.TrivialAugmentWide(interpolation=InterpolationMode.BILINEAR), T.PILToTensor(),
                       T.ConvertImageDtype(torch.float), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
                       T.RandomErasing(0.1)])
beta_mixup, beta_cutmix = torch.distributions.Beta(0.2, 0.2), torch.distributions.Beta(1.0, 1.0)

def mixup_or_cutmix(x, y):
    # transforms.v2's RandomChoice([MixUp(0.2), CutMix(1.0)]), step for step.
    target = torch.nn.functional.one_hot(y, num_classes=1000).float()
    if int(torch.randint(2, ())) == 0:
        lam = float(beta_mixup.sample(()))
        x = x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam))
    else:
        lam = float(beta_cutmix.sample(()))
        H, W = x.shape[-2:]
        r_x, r_y = torch.randint(W, size=(1,)), torch.randint(H, size=(1,))
        r = 0.5 * math.sqrt(1.0 - lam)
        x1, y1 = int(torch.clamp(r_x - int(r * W), min=0)), int(torch.clamp(r_y - int(r * H), min=0))
        x2, y2 = int(torch.clamp(r_x + int(r * W), max=W)), int(torch.clamp(r_y + int(r * H), max=H))
        rolled = x.roll(1, 0)
        x = x.clone()
        x[..., y1:y2, x1:x2] = rolled[..., y1:y2, x1:x2]
        lam = 1.0 - (x2 - x1) * (y2 - y1) / (W * H)
    return x, target.roll(1, 0).mul_(1.0 - lam).add_(target.mul(lam))

start = time.perf_counter()
for batch in batches:
    images = torch.stack([per_image(Image.open(io.BytesIO(data)).convert("RGB")) for data in batch])
    mixup_or_cutmix(images, labels)
print(len(batches) * BATCH / (time.perf_counter() - start))
"""

OURS = PRELUDE + r"""
from tensorcom import imaging
per_image = imaging.Compose([imaging.RandomResizedCrop(176, generator=imaging.Generator(1)),
                             imaging.RandomHorizontalFlip(), imaging.TrivialAugmentWide(interpolation="bilinear")])
erase = imaging.RandomErasing(0.1)
mix = imaging.MixUpOrCutMix(mixup_alpha=0.2, cutmix_alpha=1.0, num_classes=1000, generator=2)
mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
start = time.perf_counter()
for batch in batches:
    pixels = torch.from_numpy(np.stack([per_image(data) for data in batch])).permute(0, 3, 1, 2)
    images = ((pixels.float() - mean) / std).contiguous()
    for image in images:
        erase(image)
    mix(images, labels)
print(len(batches) * BATCH / (time.perf_counter() - start))
"""

TIMM = PRELUDE + r"""
sys.path.insert(0, sys.argv[1] + "/../tests/bindings")
sys.path.insert(0, sys.argv[1] + "/../tests")
from PIL import Image
from torchvision import transforms as T
from torchvision.transforms import InterpolationMode
from test_timm_augment import timm_apply, timm_reference_draws
rng = np.random.default_rng(0)
crop = T.Compose([T.RandomResizedCrop(160, interpolation=InterpolationMode.BICUBIC), T.RandomHorizontalFlip()])

def fast_collate_mixup(samples):
    # timm's FastCollateMixup, mode batch: Mixup(0.1) or CutMix(1.0) evenly, uint8 blend rounded.
    n = len(samples)
    output = torch.zeros((n, *samples[0].shape), dtype=torch.uint8)
    use_cutmix = rng.random() < 0.5
    lam = float(rng.beta(1.0, 1.0) if use_cutmix else rng.beta(0.1, 0.1))
    if use_cutmix:
        h, w = samples[0].shape[-2:]
        ratio = np.sqrt(1 - lam)
        cut_h, cut_w = int(h * ratio), int(w * ratio)
        cy, cx = rng.integers(0, h), rng.integers(0, w)
        yl, yh = np.clip(cy - cut_h // 2, 0, h), np.clip(cy + cut_h // 2, 0, h)
        xl, xh = np.clip(cx - cut_w // 2, 0, w), np.clip(cx + cut_w // 2, 0, w)
        lam = 1.0 - (yh - yl) * (xh - xl) / float(h * w)
    for i in range(n):
        mixed = samples[i]
        if use_cutmix:
            mixed = mixed.copy()
            mixed[:, yl:yh, xl:xh] = samples[n - i - 1][:, yl:yh, xl:xh]
        else:
            mixed = mixed.astype(np.float32) * lam + samples[n - i - 1].astype(np.float32) * (1 - lam)
            np.rint(mixed, out=mixed)
        output[i] += torch.from_numpy(mixed.astype(np.uint8))
    off, on = 0.1 / 1000, 1 - 0.1 + 0.1 / 1000
    hot = lambda t: torch.full((n, 1000), off).scatter_(1, t.view(-1, 1), on)
    return output, hot(labels) * lam + hot(labels.flip(0)) * (1.0 - lam)

start = time.perf_counter()
for batch in batches:
    samples = []
    for data in batch:
        image = crop(Image.open(io.BytesIO(data)).convert("RGB"))
        for name, argument in timm_reference_draws(1, 6, 0.5, image.width, image.height, rng)[0]:
            image = timm_apply(image, name + (":bicubic" if rng.random() < 0.5 else ":bilinear"), argument)
        samples.append(np.asarray(image, dtype=np.uint8).transpose(2, 0, 1))
    fast_collate_mixup(samples)
print(len(batches) * BATCH / (time.perf_counter() - start))
"""

TORCHVISION_SERVER = ("--size", "176", "--auto-augment", "ta_wide", "--random-erase", "0.1", "--dtype", "float32",
                      "--layout", "BCHW")
TORCHVISION_MIX = ("--mixup-alpha", "0.2", "--cutmix-alpha", "1.0")
TIMM_SERVER = ("--size", "160", "--aa", "rand-m6-mstd0.5-inc1", "--mixup-alpha", "0.1", "--cutmix-alpha", "1.0",
               "--mix-mode", "batch")  # with --interpolation bicubic


def one_core(script, build, paths):
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", script, build, *paths], capture_output=True,
                         text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"a reference path failed: {out.stderr.strip()[-800:]}")
    return float(out.stdout.strip())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", required=True)
    parser.add_argument("--build", default="build")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    paths = throughput.shard_paths(args.shards)
    images = throughput.count_images(paths)
    build = os.path.abspath(args.build)
    runs = {
        "(t)": lambda: one_core(TORCHVISION, build, paths),
        "(i)": lambda: one_core(OURS, build, paths),
        "(s)": lambda: throughput.server(build, args.shards, images, 1, "0", 2,
                                         extra=TORCHVISION_SERVER + TORCHVISION_MIX),
        "(s0)": lambda: throughput.server(build, args.shards, images, 1, "0", 2, extra=TORCHVISION_SERVER),
        "(T)": lambda: one_core(TIMM, build, paths),
        "(S)": lambda: throughput.server(build, args.shards, images, 1, "0", 2, "bicubic", extra=TIMM_SERVER),
    }
    best = {}
    for _ in range(args.repeat):
        for name, run in runs.items():
            rate = run()
            print(f"  {name} {rate:.1f} images/s", file=sys.stderr, flush=True)
            best[name] = max(best.get(name, 0.0), rate)
    labels = {"(t)": "torchvision v2 recipe on PIL, batches of 128",
              "(i)": "tensorcom.imaging: the same in the same loop",
              "(s)": "server, 1 worker: the same (batches of 256)",
              "(s0)": "server, 1 worker: the same without MixUp/CutMix",
              "(T)": "timm A3 restated on PIL + fast collate mixup",
              "(S)": "server, 1 worker: the same"}
    print(f"one core, {images} JPEGs, best of {args.repeat}")
    for name, label in labels.items():
        print(f"  {name:5s} {label:52s} {best[name]:8.1f} images/s")
    print(f"  torchvision recipe: (s) / (t) = {best['(s)'] / best['(t)']:.2f}, (i) / (t) = "
          f"{best['(i)'] / best['(t)']:.2f} (target >= 3); mixing's cost (s0) / (s) = {best['(s0)'] / best['(s)']:.3f}")
    print(f"  timm A3: (S) / (T) = {best['(S)'] / best['(T)']:.2f} (target >= 3)")


if __name__ == "__main__":
    main()
