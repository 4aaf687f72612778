#!/usr/bin/python3
"""The recipes' per-image augmentations, one core, on the same JPEGs,
measured in one run:
  (t) torchvision as usually run: Image.open(BytesIO(b)).convert("RGB"),
      then RandomResizedCrop(176) + RandomHorizontalFlip + TrivialAugmentWide;
  (i) tensorcom.imaging's Compose of the same three on the bytes (one fused
      call an image), and (i0) without TrivialAugmentWide: its cost;
  (s) serve-imagenet-shards, one worker on one core (its consumer on the
      other), --size 176 --auto-augment ta_wide, and (s0) without it.
Ratios: (i) / (t) and (s) / (t) (target >= 3), (i) / (i0) and (s) / (s0)
(TrivialAugmentWide's share: target >= 1 / 1.3).
Then the cost of each operation on a 176x176 crop, ours (tensorcom's
_tensorcom.image_op) and torchvision's functional call on a PIL image, in
microseconds, each op at a middle magnitude over --crops crops.
Each rate is the best of --repeat runs, taken in turns. The machine is
shared and noisy: compare figures of one run only.

    tests/bench/augment_policies.py --shards 'DIR/photos-{000000..000003}.tar' [--build build] [--repeat 3]
"""
import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import augment_throughput as throughput  # noqa: E402  (shard_paths, server)

SIZE = 176

TORCHVISION = throughput.TORCHVISION_TEMPLATE.replace(
    "{transforms}", "transforms.RandomResizedCrop(176), transforms.RandomHorizontalFlip(), "
    "transforms.TrivialAugmentWide()")

# The shards' JPEGs (paths from sys.argv[3:]) as `jpegs`, for the scripts below.
READ_JPEGS = r"""
import os, sys, tarfile, time
sys.path.insert(0, os.path.join(sys.argv[1], "bindings"))
jpegs = []
for path in sys.argv[3:]:
    with tarfile.open(path) as tar:
        jpegs += [tar.extractfile(m).read() for m in tar if m.name.lower().endswith((".jpg", ".jpeg"))]
"""

OURS = READ_JPEGS + r"""
from tensorcom import imaging
steps = [imaging.RandomResizedCrop(176, generator=imaging.Generator(1)), imaging.RandomHorizontalFlip()]
if sys.argv[2] == "ta":
    steps.append(imaging.TrivialAugmentWide(interpolation="bilinear"))
augment = imaging.Compose(steps)
start = time.perf_counter()
for data in jpegs:
    augment(data)
print(len(jpegs) / (time.perf_counter() - start))
"""

OPS = READ_JPEGS + r"""
import io, json
import numpy as np
from PIL import Image
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode
from torchvision.transforms.autoaugment import _apply_op
from tensorcom import _tensorcom as C
crops = [np.asarray(Image.open(io.BytesIO(data)).convert("RGB").resize((176, 176), Image.BILINEAR)).copy()
         for data in jpegs[:int(sys.argv[2])]]
ops = [("ShearX", "shear_x", 0.5), ("ShearY", "shear_y", 0.5), ("TranslateX", "translate_x", 16.0),
       ("TranslateY", "translate_y", 16.0), ("Rotate", "rotate", 67.5), ("Brightness", "brightness", 0.5),
       ("Color", "saturation", 0.5), ("Contrast", "contrast", 0.5), ("Sharpness", "sharpness", 0.5),
       ("Posterize", "posterize", 5.0), ("Solarize", "solarize", 128.0), ("AutoContrast", "autocontrast", 0.0),
       ("Equalize", "equalize", 0.0)]
enhance = {"brightness", "saturation", "contrast", "sharpness"}
pils = [Image.fromarray(c) for c in crops]
out = {}
for name, ours, magnitude in ops:
    best_ours = best_theirs = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for crop in crops:
            C.image_op(ours, crop.copy(), 1.0 + magnitude if ours in enhance else magnitude, "bilinear")
        best_ours = min(best_ours, (time.perf_counter() - start) / len(crops))
        start = time.perf_counter()
        for image in pils:
            np.asarray(_apply_op(image, name, magnitude, InterpolationMode.BILINEAR, None))
        best_theirs = min(best_theirs, (time.perf_counter() - start) / len(crops))
    copy_cost = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for crop in crops:
            crop.copy()
        copy_cost = min(copy_cost, (time.perf_counter() - start) / len(crops))
    out[name] = (1e6 * (best_ours - copy_cost), 1e6 * best_theirs)
print(json.dumps(out))
"""


def one_core(*command):
    out = subprocess.run(["taskset", "-c", "0", *command], capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        sys.exit(f"{command[:3]} failed: {out.stderr.strip()[-500:]}")
    return out.stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", required=True)
    parser.add_argument("--build", default="build")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--crops", type=int, default=200)
    args = parser.parse_args()
    paths = throughput.shard_paths(args.shards)
    images = throughput.count_images(paths)
    build = os.path.abspath(args.build)
    best = {}
    runs = {
        "(t)": lambda: float(one_core(sys.executable, "-c", TORCHVISION, *paths)),
        "(i)": lambda: float(one_core(sys.executable, "-c", OURS, build, "ta", *paths)),
        "(i0)": lambda: float(one_core(sys.executable, "-c", OURS, build, "none", *paths)),
        "(s)": lambda: throughput.server(build, args.shards, images, 1, "0", 2,
                                         extra=("--size", str(SIZE), "--auto-augment", "ta_wide")),
        "(s0)": lambda: throughput.server(build, args.shards, images, 1, "0", 2, extra=("--size", str(SIZE))),
    }
    for _ in range(args.repeat):
        for name, run in runs.items():
            best[name] = max(best.get(name, 0.0), run())
    labels = {"(t)": "torchvision: RRC(176) + flip + TrivialAugmentWide on PIL",
              "(i)": "tensorcom.imaging: the same, one fused call",
              "(i0)": "tensorcom.imaging: RRC(176) + flip",
              "(s)": "server, 1 worker: --size 176 --auto-augment ta_wide",
              "(s0)": "server, 1 worker: --size 176"}
    print(f"one core, {images} JPEGs, best of {args.repeat}")
    for name, label in labels.items():
        print(f"  {name:5s} {label:58s} {best[name]:8.1f} images/s")
    print(f"  (i) / (t) = {best['(i)'] / best['(t)']:.2f} (target >= 3)   "
          f"(s) / (t) = {best['(s)'] / best['(t)']:.2f} (target >= 3)")
    print(f"  TrivialAugmentWide's cost: (i0) / (i) = {best['(i0)'] / best['(i)']:.2f}, "
          f"(s0) / (s) = {best['(s0)'] / best['(s)']:.2f} (target <= 1.30)")
    costs = json.loads(one_core(sys.executable, "-c", OPS, build, str(args.crops), *paths))
    print(f"each operation on a {SIZE}x{SIZE} crop, microseconds (ours; torchvision on PIL)")
    for name, (ours, theirs) in costs.items():
        print(f"  {name:13s} {ours:7.1f} {theirs:8.1f}   {theirs / max(ours, 0.1):6.1f} x")
    print(json.dumps({"images_per_s": best, "op_us": costs}))


if __name__ == "__main__":
    main()
