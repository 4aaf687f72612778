#!/usr/bin/python3
"""The augmentation policies' operations against torchvision on natural
photos: each photo of the bench shards resized to a crop-like size with
PIL, then every colour and geometric operation over a spread of
magnitudes (the geometric ones nearest, bilinear and bicubic) applied by
tensorcom and by torchvision's functional API / _apply_op on the PIL
image. Prints, per operation, how many outputs are bit-exact (the goal:
all of them) and the largest difference of the rest.

    PYTHONPATH=build/bindings tests/bench/policy_fidelity_photos.py --shards 'DIR/photos-{000000..000003}.tar'
        [--images 100]
"""
import argparse
import io
import subprocess
import tarfile

import numpy as np
from PIL import Image
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode
from torchvision.transforms.autoaugment import _apply_op

from tensorcom import _tensorcom as C

FACTORS = (0.0, 0.1, 0.37, 0.5, 0.99, 1.0, 1.3, 1.9)
COLOUR = {
    "invert": [(0, lambda im, a: F.invert(im))],
    "posterize": [(b, lambda im, a: F.posterize(im, int(a))) for b in range(9)],
    "solarize": [(t, lambda im, a: F.solarize(im, a)) for t in (0.0, 17.3, 100.0, 128.0, 200.5, 255.0, 256.0)],
    "autocontrast": [(0, lambda im, a: F.autocontrast(im))],
    "equalize": [(0, lambda im, a: F.equalize(im))],
    "brightness": [(f, lambda im, a: F.adjust_brightness(im, a)) for f in FACTORS],
    "saturation": [(f, lambda im, a: F.adjust_saturation(im, a)) for f in FACTORS],
    "contrast": [(f, lambda im, a: F.adjust_contrast(im, a)) for f in FACTORS],
    "sharpness": [(f, lambda im, a: F.adjust_sharpness(im, a)) for f in FACTORS],
    "hue": [(f, lambda im, a: F.adjust_hue(im, a)) for f in (-0.5, -0.3, -0.05, 0.1, 0.25, 0.5)],
    "grayscale": [(0, lambda im, a: F.to_grayscale(im, 3))],
}
GEOMETRIC = {"shear_x": ("ShearX", [-0.99, -0.3, 0.033, 0.5, 0.99]),
             "shear_y": ("ShearY", [-0.99, -0.3, 0.033, 0.5, 0.99]),
             "translate_x": ("TranslateX", [-32.0, -3.2, 1.07, 16.0, 67.6]),
             "translate_y": ("TranslateY", [-32.0, -3.2, 1.07, 16.0, 67.6]),
             "rotate": ("Rotate", [-135.0, -30.0, 4.5, 45.5, 90.0, 180.0])}
MODES = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR,
         "bicubic": InterpolationMode.BICUBIC}


def photos(pattern, count):
    names = subprocess.run(["bash", "-c", f"printf '%s\\n' {pattern}"], capture_output=True, text=True,
                           check=True).stdout.split()
    out = []
    for name in names:
        with tarfile.open(name) as tar:
            for member in tar:
                if member.name.lower().endswith((".jpg", ".jpeg")) and len(out) < count:
                    image = Image.open(io.BytesIO(tar.extractfile(member).read())).convert("RGB")
                    # Crop-like sizes, square and not.
                    out.append(image.resize((160 + len(out) % 7 * 13, 150 + len(out) % 5 * 11), Image.BILINEAR))
    return out


def compare(cases, images):
    exact = total = worst = 0
    for want_of, got_of in cases:
        for image in images:
            want = np.asarray(want_of(image))
            got = got_of(image)
            total += 1
            if np.array_equal(want, got):
                exact += 1
            else:
                worst = max(worst, int(np.abs(want.astype(int) - got).max()))
    return exact, total, worst


def ours(name, argument, **options):
    def run(image):
        out = np.array(image)
        C.image_op(name, out, float(argument), **options)
        return out
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", required=True)
    parser.add_argument("--images", type=int, default=100)
    args = parser.parse_args()
    images = photos(args.shards, args.images)
    print(f"{len(images)} photos; bit-exact outputs of all, and the largest difference of the rest")
    rows = []
    for name, cases in COLOUR.items():
        rows.append((name, compare([(lambda im, r=r, a=a: r(im, a), ours(name, a)) for a, r in cases], images)))
    for mode, interpolation in MODES.items():
        for name, (op, magnitudes) in GEOMETRIC.items():
            cases = [(lambda im, m=m, op=op, i=interpolation: _apply_op(im, op, m, i, None),
                      ours(name, m, interpolation=mode)) for m in magnitudes]
            rows.append((f"{name} {mode}", compare(cases, images)))
    for name, (exact, total, worst) in rows:
        print(f"  {name:22s} {exact:6d} / {total:6d} exact   worst difference {worst}")


if __name__ == "__main__":
    main()
