"""The same pixels and crops as torchvision on PIL images.

serve-imagenet-shards against torchvision's transforms (Debian's
python3-torchvision and python3-pil), on textured images of awkward sizes:
  - --val against Resize(size*256/224, or --val-resize, or timm's crop_pct)
    + CenterCrop(size), bilinear and bicubic;
  - training crops re-made with torchvision from the crop box and flip that
    --meta records (resized_crop, then hflip);
  - RandomResizedCrop's area fractions and aspect ratios against
    RandomResizedCrop.get_params, by a two-sample Kolmogorov-Smirnov test.

    TENSORCOM_BUILD_DIR   the meson build dir (servers/serve-imagenet-shards)
"""
import io
import math
import os
import subprocess
import sys
import tarfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
T = pytest.importorskip("torchvision.transforms")
F = pytest.importorskip("torchvision.transforms.functional")
from PIL import Image  # noqa: E402  (python3-pil comes with torchvision)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "servers"))
import server_helpers as h  # noqa: E402
from pictures import psnr, textured  # noqa: E402  (tests/, on PYTHONPATH)
from statistics_tests import ks_2samp  # noqa: E402

MODES = {"bilinear": T.InterpolationMode.BILINEAR, "bicubic": T.InterpolationMode.BICUBIC}


def decoded_at_full_scale(shorter_side, resized_side):
    """Whether the server decodes at full size: a DCT-scaled decode (num/8)
    needs at least twice the shrink left to Pillow's filter, so a source
    side under 2 * 8/7 of the output side is never scaled."""
    return shorter_side * 7 < 2 * 8 * resized_side


def assert_bit_exact_at_full_scale(scores, full_scale):
    """Without DCT scaling the server's pixels are Pillow's, bit for bit."""
    exact = [s for s, full in zip(scores, full_scale) if full]
    assert exact, "no output decoded at full scale: the test images are too large for this check"
    assert all(s == 99.0 for s in exact), exact


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """(shard path, {key: encoded bytes}): JPEGs and PNGs, portrait and landscape."""
    d = tmp_path_factory.mktemp("fidelity")
    rng = np.random.default_rng(31)
    sizes = [(375, 500), (500, 333), (301, 457), (480, 640), (257, 256), (600, 263), (224, 300), (999, 1000)]
    samples, encoded = [], {}
    for i, (hh, ww) in enumerate(sizes * 2):
        ext = "png" if i % 4 == 3 else "jpg"
        data = h.encode(textured(rng, hh, ww), ext, quality=90) if ext == "jpg" else h.encode(textured(rng, hh, ww), ext)
        key = f"f{i:02d}"
        encoded[key] = data
        samples.append((key, {ext: data, "cls": h.cls(i % 3)}))
    return h.write_tar(str(d / "fidelity.tar"), samples), encoded


def serve(path, tmp_path, *args):
    r = h.run_server(["-u", path, "--meta", "-r", "0", "-w", "1", "--shuffle", "0", *args], str(tmp_path))
    assert r.rc == 0, r
    return r


def pil(data):
    return Image.open(io.BytesIO(data)).convert("RGB")


# (flags, the shorter side they resize to for size 224): the default,
# torchvision's ResNet-50 v2 recipe (--val-resize-size 232) and timm's RSB
# (crop_pct 0.95: floor(224 / 0.95)).
RESIZES = [((), None), (("--val-resize", "232"), 232), (("--crop-pct", "0.95"), math.floor(224 / 0.95))]


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size, resize", [(224, RESIZES[0]), (97, RESIZES[0]), (224, RESIZES[1]), (224, RESIZES[2])],
                         ids=["224", "97", "resize-232", "crop-pct-0.95"])
def test_val_gives_torchvisions_pixels(data, tmp_path, interpolation, size, resize):
    path, encoded = data
    flags, resize_to = resize
    r = serve(path, tmp_path, "--epochs", "1", "-b", "4", "--size", str(size), "--val", "--interpolation", interpolation,
              *flags)
    resize_to = resize_to or round(size * 256 / 224)
    transform = T.Compose([T.Resize(resize_to, interpolation=MODES[interpolation]), T.CenterCrop(size)])
    scores, full_scale = [], []
    for key, _, image in r.samples():
        source = pil(encoded[key])
        scores.append(psnr(np.asarray(transform(source)), image))
        full_scale.append(decoded_at_full_scale(min(source.size), resize_to))
    assert len(scores) == len(encoded)
    print(f"--val {interpolation} size {size} resized to {resize_to}: PSNR mean {np.mean(scores):.1f} dB, min {min(scores):.1f} dB")
    assert np.mean(scores) >= 40 and min(scores) >= 30, scores
    assert_bit_exact_at_full_scale(scores, full_scale)


def test_reduced_shards_serve_torchvisions_transforms_of_the_reduced_files(data, tmp_path):
    """make-shards --max-side: a training run on the reduced shards sees
    torchvision's transforms applied to the reduced files, exactly where they
    are decoded at full scale."""
    path, encoded = data
    make_shards = os.path.join(h.BUILD_DIR, "tools", "make_shards", "make-shards")
    out = subprocess.run([make_shards, "--from-shards", path, "--max-side", "320", "--restart-markers",
                          "-o", str(tmp_path / "reduced-%d.tar")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    reduced = {}
    with tarfile.open(tmp_path / "reduced-0.tar") as tar:
        for member in tar:
            key, ext = member.name.split(".", 1)
            if ext in ("jpg", "png"):
                reduced[key] = tar.extractfile(member).read()
    for key, image in reduced.items():  # JPEGs reduced to at most 320 a side, PNGs kept
        if image[:3] == b"\xff\xd8\xff":
            assert max(pil(image).size) == min(max(pil(encoded[key]).size), 320), key
        else:
            assert image == encoded[key], key
    r = serve(str(tmp_path / "reduced-0.tar"), tmp_path, "--epochs", "1", "-b", "4", "--val")
    transform = T.Compose([T.Resize(256), T.CenterCrop(224)])
    scores, full_scale = [], []
    for key, _, image in r.samples():
        source = pil(reduced[key])
        scores.append(psnr(np.asarray(transform(source)), image))
        full_scale.append(decoded_at_full_scale(min(source.size), 256))
    assert len(scores) == len(reduced)
    assert_bit_exact_at_full_scale(scores, full_scale)
    assert min(scores) >= 30, scores


def test_fast_interpolation_is_still_there_and_differs(data, tmp_path):
    path, encoded = data
    r = serve(path, tmp_path, "--epochs", "1", "-b", "4", "--size", "224", "--val", "--interpolation", "fast")
    transform = T.Compose([T.Resize(256), T.CenterCrop(224)])
    scores = [psnr(np.asarray(transform(pil(encoded[key]))), image) for key, _, image in r.samples()]
    print(f"--val fast: PSNR mean {np.mean(scores):.1f} dB, min {min(scores):.1f} dB")
    assert np.mean(scores) < 40  # the 2-tap filter aliases on texture: why bilinear is the default


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_training_crops_are_remade_by_torchvision_from_meta(data, tmp_path, interpolation):
    path, encoded = data
    size = 128
    r = serve(path, tmp_path, "--epochs", "2", "-b", "4", "--size", str(size), "--seed", "5",
              "--interpolation", interpolation)
    scores, flips, full_scale = [], 0, []
    for arrays, meta in zip(r.batches, r.metas):
        assert len(meta["crops"]) == len(meta["keys"]) == len(meta["flips"]) == len(meta["sizes"])
        for image, key, (x, y, w, hgt), flip, source in zip(arrays[0], meta["keys"], meta["crops"], meta["flips"],
                                                          meta["sizes"]):
            src = pil(encoded[key])
            assert list(src.size) == source
            ref = F.resized_crop(src, y, x, hgt, w, [size, size], interpolation=MODES[interpolation])
            if flip:
                ref = F.hflip(ref)
                flips += 1
            scores.append(psnr(np.asarray(ref), image))
            full_scale.append(decoded_at_full_scale(min(w, hgt), size))
    assert len(scores) == 2 * len(encoded)
    assert 0 < flips < len(scores)
    print(f"training {interpolation}: PSNR mean {np.mean(scores):.1f} dB, min {min(scores):.1f} dB")
    assert np.mean(scores) >= 38 and min(scores) >= 30, scores
    assert_bit_exact_at_full_scale(scores, full_scale)


@pytest.mark.parametrize("policy, interpolation", [("ta_wide", "bilinear"), ("ra", "nearest"),
                                                   ("imagenet", "bilinear")])
def test_policy_samples_are_remade_by_torchvision_from_meta(data, tmp_path, policy, interpolation):
    """The crop, the flip, then each operation --meta records, applied by
    torchvision's own _apply_op to the PIL crop: the server's pixels."""
    autoaugment = pytest.importorskip("torchvision.transforms.autoaugment")
    modes = {"nearest": T.InterpolationMode.NEAREST, "bilinear": T.InterpolationMode.BILINEAR}
    path, encoded = data
    size = 128
    r = serve(path, tmp_path, "--epochs", "3", "-b", "4", "--size", str(size), "--seed", "9",
              "--auto-augment", policy, "--policy-interpolation", interpolation)
    scores, full_scale, ops_seen = [], [], set()
    for arrays, meta in zip(r.batches, r.metas):
        ops = meta.get("ops", [[] for _ in meta["keys"]])
        assert len(ops) == len(meta["keys"])
        for image, key, (x, y, w, hgt), flip, flat in zip(arrays[0], meta["keys"], meta["crops"], meta["flips"], ops):
            ref = F.resized_crop(pil(encoded[key]), y, x, hgt, w, [size, size], interpolation=MODES["bilinear"])
            if flip:
                ref = F.hflip(ref)
            for name, magnitude in zip(flat[::2], flat[1::2]):
                ref = autoaugment._apply_op(ref, name, magnitude, modes[interpolation], None)
                ops_seen.add(name)
            scores.append(psnr(np.asarray(ref), image))
            full_scale.append(decoded_at_full_scale(min(w, hgt), size))
    assert len(scores) == 3 * len(encoded)
    assert len(ops_seen) >= 5, ops_seen
    print(f"{policy}: PSNR mean {np.mean(scores):.1f} dB, min {min(scores):.1f} dB, ops {sorted(ops_seen)}")
    assert_bit_exact_at_full_scale(scores, full_scale)


def test_timm_rand_augment_is_remade_from_meta(data, tmp_path):
    """--aa: each recorded timm operation, done by the Pillow call timm's op
    function makes (rotate, AFFINE transform, ImageEnhance, ImageOps), with
    timm's fill for ImageNet's mean and the filter the call chose."""
    from PIL import ImageEnhance, ImageOps
    path, encoded = data
    size, fill = 96, (124, 116, 104)
    r = serve(path, tmp_path, "--epochs", "3", "-b", "4", "--size", str(size), "--seed", "4",
              "--aa", "rand-m9-mstd0.5-inc1")
    filters = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}
    scores, full_scale, seen = [], [], set()
    for arrays, meta in zip(r.batches, r.metas):
        ops = meta.get("ops", [[] for _ in meta["keys"]])
        for image, key, (x, y, w, hgt), flip, flat in zip(arrays[0], meta["keys"], meta["crops"], meta["flips"], ops):
            ref = F.resized_crop(pil(encoded[key]), y, x, hgt, w, [size, size], interpolation=MODES["bilinear"])
            if flip:
                ref = F.hflip(ref)
            for name, arg in zip(flat[::2], flat[1::2]):
                base, _, how = name.partition(":")
                seen.add(base)
                kw = {"fillcolor": fill, "resample": filters.get(how)}
                matrices = {"timm_shear_x": (1, arg, 0, 0, 1, 0), "timm_shear_y": (1, 0, 0, arg, 1, 0),
                            "timm_translate_x": (1, 0, arg, 0, 1, 0), "timm_translate_y": (1, 0, 0, 0, 1, arg)}
                if base == "timm_rotate":
                    ref = ref.rotate(arg, **kw)
                elif base in matrices:
                    ref = ref.transform(ref.size, Image.AFFINE, matrices[base], **kw)
                elif base == "timm_solarize_add":
                    ref = ref.point([min(255, i + int(arg)) if i < 128 else i for i in range(256)] * 3)
                elif base.startswith("adjust_"):
                    enhancer = {"adjust_saturation": ImageEnhance.Color}.get(
                        base, getattr(ImageEnhance, base[len("adjust_"):].capitalize(), None))
                    ref = enhancer(ref).enhance(arg)
                else:
                    ref = autoaugment_op(ref, base, arg, ImageOps)
            scores.append(psnr(np.asarray(ref), image))
            full_scale.append(decoded_at_full_scale(min(w, hgt), size))
    assert len(seen) >= 8, seen
    assert_bit_exact_at_full_scale(scores, full_scale)


def autoaugment_op(image, name, argument, ImageOps):
    if name == "Posterize":
        return image if argument >= 8 else ImageOps.posterize(image, int(argument))
    if name == "Solarize":
        return ImageOps.solarize(image, argument)
    return {"AutoContrast": ImageOps.autocontrast, "Equalize": ImageOps.equalize, "Invert": ImageOps.invert}[name](image)


def test_color_jitter_and_grayscale_are_remade_by_torchvision_from_meta(data, tmp_path):
    """ColorJitter's four adjustments in their drawn order and factors, then
    RandomGrayscale, as --meta records them: torchvision's functional calls."""
    path, encoded = data
    size = 96
    r = serve(path, tmp_path, "--epochs", "3", "-b", "4", "--size", str(size), "--seed", "2",
              "--color-jitter", "0.4,0.4,0.4,0.1", "--random-grayscale", "0.3")
    scores, full_scale, orders, greys = [], [], set(), 0
    for arrays, meta in zip(r.batches, r.metas):
        for image, key, (x, y, w, hgt), flip, flat in zip(arrays[0], meta["keys"], meta["crops"], meta["flips"],
                                                          meta["ops"]):
            ref = F.resized_crop(pil(encoded[key]), y, x, hgt, w, [size, size], interpolation=MODES["bilinear"])
            if flip:
                ref = F.hflip(ref)
            names = flat[::2]
            assert sorted(n for n in names if n != "rgb_to_grayscale") == [
                "adjust_brightness", "adjust_contrast", "adjust_hue", "adjust_saturation"], names
            orders.add(tuple(names[:4]))
            for name, argument in zip(names, flat[1::2]):
                ref = getattr(F, name)(ref, int(argument) if name == "rgb_to_grayscale" else argument)
            greys += "rgb_to_grayscale" in names
            scores.append(psnr(np.asarray(ref), image))
            full_scale.append(decoded_at_full_scale(min(w, hgt), size))
    assert len(orders) >= 6 and 0 < greys < len(scores), (len(orders), greys)
    assert_bit_exact_at_full_scale(scores, full_scale)


def test_random_erase_boxes_and_values(data, tmp_path):
    """--random-erase: uint8 output keeps its pixels (the draws come last)
    and carries the boxes; float output has exactly those boxes erased to 0,
    and erasing the uint8 batch after normalising gives it."""
    path, _ = data
    common = ["--epochs", "1", "-b", "4", "--size", "64", "--seed", "3"]
    plain = serve(path, tmp_path, *common)
    boxed = serve(path, tmp_path, *common, "--random-erase", "0.8")
    floats = serve(path, tmp_path, *common, "--random-erase", "0.8", "--dtype", "float32")
    boxes = [box for meta in boxed.metas for box in meta["erase"]]
    assert 0 < sum(1 for b in boxes if b) < len(boxes)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(plain.batches, boxed.batches))
    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
    for uint8_batch, float_batch, meta in zip(boxed.batches, floats.batches, boxed.metas):
        normalised = ((uint8_batch[0].astype(np.float32) / 255 - mean) / std).transpose(0, 3, 1, 2).copy()
        served = float_batch[0].transpose(0, 3, 1, 2)
        for image, erased, box in zip(served, normalised, meta["erase"]):
            if box:  # torchvision's erase(img, top, left, height, width, 0)
                t, l, h, w = box
                erased[:, t:t + h, l:l + w] = 0
                assert not image[:, t:t + h, l:l + w].any()
        assert np.allclose(normalised, served, atol=1e-5)


def test_augmented_streams_repeat_with_their_seed(data, tmp_path):
    """Every draw comes from the sample's (seed, epoch, position): two runs
    with one seed serve the same pixels and record the same operations."""
    path, _ = data
    args = ["--epochs", "2", "-b", "4", "--size", "48", "--seed", "12", "--aa", "rand-m9-mstd0.5-inc1",
            "--color-jitter", "0.3", "--random-grayscale", "0.2", "--random-erase", "0.5"]
    first, second = serve(path, tmp_path, *args), serve(path, tmp_path, *args)
    assert len(first.batches) == len(second.batches) > 0
    for a, b in zip(first.batches, second.batches):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    for a, b in zip(first.metas, second.metas):
        assert a["ops"] == b["ops"] and a.get("erase") == b.get("erase") and a["crops"] == b["crops"]
    assert any("erase" in meta for meta in first.metas)


def test_policy_flags_are_checked(tmp_path):
    for args, message in [(["--auto-augment", "randaug"], "--auto-augment: unknown augmentation policy 'randaug'"),
                          (["--auto-augment", "ra", "--ra-magnitude", "31"], "--ra-magnitude: RandAugment's magnitude"),
                          (["--auto-augment", "ta_wide", "--ra-magnitude", "5"], "need --auto-augment ra"),
                          (["--ra-num-ops", "3"], "need --auto-augment or --aa"),
                          (["--auto-augment", "ta_wide", "--val"], "not with --val"),
                          (["--auto-augment", "ra", "--policy-interpolation", "lanczos"],
                           "--policy-interpolation must be nearest, bilinear or bicubic, not 'lanczos'"),
                          (["--auto-augment", "ra", "--policy-interpolation", "random"],
                           "--policy-interpolation must be nearest, bilinear or bicubic, not 'random'"),
                          (["--aa", "rand-m9-q4"], "--aa: timm RandAugment 'rand-m9-q4': unknown section 'q4'"),
                          (["--aa", "ta_wide"], "--aa takes timm's RandAugment strings"),
                          (["--auto-augment", "rand-m9"], "timm's strings go to --aa"),
                          (["--auto-augment", "ra", "--aa", "rand-m9"], "one policy, not both"),
                          (["--color-jitter", "0.4,0.4"], "expected B, B,C,S or B,C,S,H"),
                          (["--color-jitter", "0.4,x,0.4"], "expected B, B,C,S or B,C,S,H"),
                          (["--color-jitter", "0.1,0.1,0.1,0.6"], "ColorJitter hue must be at most 0.5"),
                          (["--color-jitter", "-1"], "ColorJitter brightness must be a finite number"),
                          (["--random-grayscale", "1.5"], "expected a probability from 0 to 1"),
                          (["--random-grayscale", "0.2", "--val"], "not with --val"),
                          (["--random-erase", "1.5"], "expected a probability from 0 to 1"),
                          (["--random-erase", "0.2"], "--random-erase with uint8 output needs --meta"),
                          (["--random-erase", "0.2", "--random-erase-value", "pixel", "--meta"],
                           "--random-erase-value must be 0 or random"),
                          (["--random-erase-value", "random"], "--random-erase-value needs --random-erase")]:
        r = h.run_server(["-u", str(tmp_path / "none.tar"), *args], str(tmp_path))
        assert r.rc == 1 and message in r.err and r.err.count("\n") == 1, (args, r.rc, r.err)


def test_random_resized_crop_statistics_match_torchvision(tmp_path):
    """20 000 crops of images of three sizes: the area fraction and the
    log aspect ratio are distributed as torchvision draws them."""
    rng = np.random.default_rng(3)
    sizes = [(48, 64), (90, 60), (40, 120)]
    samples = [(f"s{i}", {"png": h.encode(textured(rng, hh, ww), "png"), "cls": h.cls(0)})
               for i, (hh, ww) in enumerate(sizes * 10)]
    path = h.write_tar(str(tmp_path / "crops.tar"), samples)
    epochs = 20000 // len(samples) + 1
    r = serve(path, tmp_path, "--epochs", str(epochs), "-b", "64", "--size", "8", "--interpolation", "fast",
              "--seed", "11")
    ours_area, ours_ratio = [], []
    for meta in r.metas:
        for (x, y, w, hgt), (sw, sh) in zip(meta["crops"], meta["sizes"]):
            ours_area.append(w * hgt / (sw * sh))
            ours_ratio.append(math.log(w / hgt))
    assert len(ours_area) >= 20000
    torch.manual_seed(0)
    theirs_area, theirs_ratio = [], []
    for k in range(len(ours_area)):
        hh, ww = sizes[k % len(sizes)]
        i, j, ch, cw = T.RandomResizedCrop.get_params(torch.empty(3, hh, ww), scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
        theirs_area.append(cw * ch / (ww * hh))
        theirs_ratio.append(math.log(cw / ch))
    for name, ours, theirs in (("area", ours_area, theirs_area), ("log ratio", ours_ratio, theirs_ratio)):
        d, p = ks_2samp(np.array(ours), np.array(theirs))
        print(f"crop {name}: KS D={d:.4f} p={p:.3f} over {len(ours)} crops")
        assert p > 0.01, f"{name}: KS D={d:.4f} p={p:.4g}"
