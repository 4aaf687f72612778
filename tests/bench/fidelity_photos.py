#!/usr/bin/python3
"""How close serve-imagenet-shards' pixels are to torchvision's on natural
photos: PSNR of each output against torchvision on PIL images, for
  --val     against Resize(size*256/224) + CenterCrop(size);
  training  against resized_crop + hflip re-made from the crop box and flip
            that --meta records.
Prints the mean and minimum PSNR, how many outputs are bit-exact, and
whether the targets of the fidelity tests hold (mean >= 40 dB and min >= 30 dB
for --val, mean >= 38 dB for training crops).

    tests/bench/fidelity_photos.py --shards 'DIR/photos-{000000..000003}.tar' [--build build] [--count 200]

Make the shards with ../shared/bench/make-photo-shards (see README). Needs
Debian's python3-torchvision and python3-pil.
"""
import argparse
import io
import math
import os
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = {"bilinear": T.InterpolationMode.BILINEAR, "bicubic": T.InterpolationMode.BICUBIC}


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def first_photos(pattern, count, folder):
    """A shard of the first `count` JPEG samples of the pattern's shards; {key: bytes}."""
    paths = subprocess.run(["bash", "-c", f"printf '%s\\n' {pattern}"], capture_output=True, text=True,
                           check=True).stdout.split()
    out_path = os.path.join(folder, "photos.tar")
    photos = {}
    with tarfile.open(out_path, "w") as out:
        for path in paths:
            with tarfile.open(path) as tar:
                for member in tar:
                    if len(photos) >= count:
                        break
                    if not member.isfile():
                        continue
                    data = tar.extractfile(member).read()
                    out.addfile(member, io.BytesIO(data))
                    if member.name.lower().endswith((".jpg", ".jpeg")):
                        photos[os.path.basename(member.name).split(".")[0]] = data
    return out_path, photos


def serve(build, shard, folder, *args):
    sys.path.insert(0, os.path.join(HERE, "..", "servers"))
    os.environ.setdefault("TENSORCOM_BUILD_DIR", build)
    import server_helpers as h
    r = h.run_server(["-u", shard, "--meta", "-r", "0", "-w", "1", "--shuffle", "0", "--epochs", "1", "-b", "8",
                      *args], folder, exe=os.path.join(build, "servers", "serve-imagenet-shards"), deadline_s=600)
    if r.rc != 0:
        sys.exit(f"server failed: {r}")
    return r


def pil(data):
    return Image.open(io.BytesIO(data)).convert("RGB")


def report(name, scores, mean_target, min_target):
    exact = sum(1 for s in scores if s >= 99.0)
    ok = np.mean(scores) >= mean_target and (min_target is None or min(scores) >= min_target)
    print(f"{name:20s} PSNR mean {np.mean(scores):5.1f} dB  min {min(scores):5.1f} dB  "
          f"5th percentile {np.percentile(scores, 5):5.1f} dB  bit-exact {exact}/{len(scores)}"
          f"  target mean >= {mean_target}" + (f", min >= {min_target}" if min_target else "") +
          f": {'met' if ok else 'NOT MET'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", required=True, help="brace pattern of photo shards")
    ap.add_argument("--build", default="build")
    ap.add_argument("--count", type=int, default=200, help="photos to compare")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--interpolation", default="bilinear", choices=sorted(MODES))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    mode = MODES[args.interpolation]
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        shard, photos = first_photos(args.shards, args.count, folder)
        r = serve(build, shard, folder, "--val", "--size", str(args.size), "--interpolation", args.interpolation)
        transform = T.Compose([T.Resize(round(args.size * 256 / 224), interpolation=mode), T.CenterCrop(args.size)])
        scores = [psnr(np.asarray(transform(pil(photos[key]))), image) for key, _, image in r.samples()]
        ok &= report(f"--val {args.interpolation}", scores, 40, 30)
        r = serve(build, shard, folder, "--size", str(args.size), "--seed", "3", "--interpolation", args.interpolation)
        scores = []
        for arrays, meta in zip(r.batches, r.metas):
            for image, key, (x, y, w, h), flip in zip(arrays[0], meta["keys"], meta["crops"], meta["flips"]):
                ref = F.resized_crop(pil(photos[key]), y, x, h, w, [args.size, args.size], interpolation=mode)
                scores.append(psnr(np.asarray(F.hflip(ref) if flip else ref), image))
        ok &= report(f"training {args.interpolation}", scores, 38, None)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
