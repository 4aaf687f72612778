"""timm's RandAugment strings ("rand-m9-mstd0.5-inc1"): parsed as timm
parses them, drawn as timm draws (its op list, per-op probability,
magnitude noise and clipping, signs, a random bilinear/bicubic choice per
geometric call), and each drawn operation giving the pixels of timm's op
function. timm cannot be installed here (no network): the reference below
is written from timm's timm/data/auto_augment.py semantics with Pillow,
which timm's functions call."""
import collections
import math

import numpy as np
import pytest

from pictures import textured
from statistics_tests import chi_square_p, ks_critical, ks_statistic
from tensorcom import _tensorcom as C
from tensorcom import imaging

Image = pytest.importorskip("PIL.Image")
from PIL import ImageEnhance, ImageOps  # noqa: E402

FILL = (124, 116, 104)  # timm's img_mean for ImageNet's mean
FILTERS = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}


def timm_apply(image, name, argument):
    """What timm's op function does with the argument the level function gave."""
    base, _, interpolation = name.partition(":")
    kwargs = {"fillcolor": FILL, "resample": FILTERS.get(interpolation)}
    if base == "timm_rotate":
        return image.rotate(argument, **kwargs)
    if base == "timm_shear_x":
        return image.transform(image.size, Image.AFFINE, (1, argument, 0, 0, 1, 0), **kwargs)
    if base == "timm_shear_y":
        return image.transform(image.size, Image.AFFINE, (1, 0, 0, argument, 1, 0), **kwargs)
    if base == "timm_translate_x":
        return image.transform(image.size, Image.AFFINE, (1, 0, argument, 0, 1, 0), **kwargs)
    if base == "timm_translate_y":
        return image.transform(image.size, Image.AFFINE, (1, 0, 0, 0, 1, argument), **kwargs)
    if base == "timm_solarize_add":
        lut = [min(255, i + int(argument)) if i < 128 else i for i in range(256)]
        return image.point(lut * 3)
    if base == "Posterize":
        return image if argument >= 8 else ImageOps.posterize(image, int(argument))
    if base == "Solarize":
        return ImageOps.solarize(image, argument)
    enhancers = {"adjust_saturation": ImageEnhance.Color, "adjust_contrast": ImageEnhance.Contrast,
                 "adjust_brightness": ImageEnhance.Brightness, "adjust_sharpness": ImageEnhance.Sharpness}
    if base in enhancers:
        return enhancers[base](image).enhance(argument)
    plain = {"AutoContrast": ImageOps.autocontrast, "Equalize": ImageOps.equalize, "Invert": ImageOps.invert}
    return plain[base](image)


@pytest.mark.parametrize("config", ["rand-m9-mstd0.5-inc1", "rand-m7-mstd0.5-inc1", "rand-m6-mstd0.5-inc1",
                                    "rand-m9-mstd0.5", "rand-n3-m10-mstd101", "rand-m5-p1.0-mmax8"])
@pytest.mark.parametrize("interpolation", ["random", "bicubic"])
def test_drawn_operations_give_timms_pixels(config, interpolation):
    rng = np.random.default_rng(4)
    for sequence in range(40):
        height, width = int(rng.integers(1, 70)), int(rng.integers(1, 70))
        pixels = textured(rng, height, width)
        ops = C.auto_augment_draw(config, width, height, 3, sequence, interpolation=interpolation)
        want = Image.fromarray(pixels)
        for name, argument in ops:
            want = timm_apply(want, name, argument)
        got = pixels.copy()
        C.auto_augment_apply(got, ops, fill=FILL)
        assert np.array_equal(got, np.asarray(want)), (config, ops, pixels.shape)
        if interpolation == "bicubic":
            assert not any(name.endswith(":bilinear") for name, _ in ops)


INCREASING = ["AutoContrast", "Equalize", "Invert", "Rotate", "PosterizeIncreasing", "SolarizeIncreasing",
              "SolarizeAdd", "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing", "SharpnessIncreasing",
              "ShearX", "ShearY", "TranslateXRel", "TranslateYRel"]


def timm_reference_draws(count, magnitude, std, width, height, rng):
    """timm's RandAugment.__call__ and AugmentOp.__call__ for an 'inc1' string,
    reduced to (op, level-argument) pairs, with NumPy's generator."""
    draws = []
    for _ in range(count):
        ops = []
        for op in rng.integers(0, 15, 2):
            if rng.random() > 0.5:
                continue
            m = min(max(rng.normal(magnitude, std), 0.0), 10.0)
            level = m / 10.0
            name = INCREASING[op]
            sign = -1.0 if rng.random() > 0.5 else 1.0
            if name == "Rotate":
                ops.append(("timm_rotate", sign * level * 30.0))
            elif name in ("ShearX", "ShearY"):
                ops.append(("timm_shear_" + name[-1].lower(), sign * level * 0.3))
            elif name.startswith("Translate"):
                size = width if name[9] == "X" else height
                ops.append(("timm_translate_" + name[9].lower(), sign * level * 0.45 * size))
            elif name.endswith("Increasing") and name[:-10] in ("Color", "Contrast", "Brightness", "Sharpness"):
                key = {"Color": "adjust_saturation"}.get(name[:-10], "adjust_" + name[:-10].lower())
                ops.append((key, max(0.1, 1.0 + sign * level * 0.9)))
            elif name == "PosterizeIncreasing":
                ops.append(("Posterize", 4 - int(level * 4)))
            elif name == "SolarizeIncreasing":
                ops.append(("Solarize", 256 - min(256, int(level * 256))))
            elif name == "SolarizeAdd":
                ops.append(("timm_solarize_add", min(128, int(level * 110))))
            else:
                ops.append((name, 0.0))
        draws.append(ops)
    return draws


def test_draws_follow_timm():
    width, height, count = 160, 128, 20000
    ours = [[(name.partition(":")[0], m) for name, m in C.auto_augment_draw("rand-m7-mstd0.5-inc1", width, height,
                                                                            5, i)] for i in range(count)]
    theirs = timm_reference_draws(count, 7, 0.5, width, height, np.random.default_rng(9))
    for part in (lambda op: op[0], lambda op: math.copysign(1.0, op[1]) if op[1] else 0.0):
        p, categories = chi_square_p(collections.Counter(part(op) for draw in ours for op in draw),
                                     collections.Counter(part(op) for draw in theirs for op in draw))
        assert p > 0.01, (p, categories)
    p, _ = chi_square_p(collections.Counter(map(len, ours)), collections.Counter(map(len, theirs)))
    assert p > 0.01, p
    # The magnitude noise, seen through the rotation's angle: |deg| = 3 m.
    mine = [abs(m) for draw in ours for name, m in draw if name == "timm_rotate"]
    ref = [abs(m) for draw in theirs for name, m in draw if name == "timm_rotate"]
    assert ks_statistic(mine, ref) < ks_critical(len(mine), len(ref))
    filters = collections.Counter(name.partition(":")[2] for i in range(2000)
                                  for name, _ in C.auto_augment_draw("rand-m7-mstd0.5-inc1", 64, 64, 6, i)
                                  if ":" in name)
    assert set(filters) == {"bilinear", "bicubic"} and abs(filters["bilinear"] - filters["bicubic"]) < 0.1 * sum(
        filters.values())


@pytest.mark.parametrize("config, message", [
    ("rand-m9-x3", "unknown section 'x3'"),
    ("rand-m9-w0", "weighted op choices"),
    ("rand-m9-tweights", "weighted op choices"),
    ("randaugment-m9", "unknown augmentation policy"),
    ("rand-m9.5", "'m9.5' needs a whole number"),
    ("rand-n17", "at most 16 operations"),
    ("rand-p1.5", "'p' is a probability"),
])
def test_strings_timm_refuses_or_we_do_not_support_are_refused(config, message):
    with pytest.raises(ValueError, match=message):
        C.auto_augment_draw(config, 32, 32, 0, 0)


def test_sections_without_digits_are_skipped_and_inc0_is_increasing_as_in_timm():
    plain = C.auto_augment_draw("rand-m9-inc0", 32, 32, 1, 1)
    assert plain == C.auto_augment_draw("rand-m9-inc1-foo", 32, 32, 1, 1)


def test_rand_augment_transform_is_timms_drop_in():
    transform = imaging.rand_augment_transform("rand-m9-mstd0.5-inc1", {"img_mean": FILL},)
    transform.generator = imaging.Generator(2)
    array = textured(6, 48, 56)
    for _ in range(20):
        ops = transform.draw_ops(56, 48)
        want = Image.fromarray(array)
        for name, argument in ops:
            want = timm_apply(want, name, argument)
        assert np.array_equal(transform.apply_ops(array, ops), np.asarray(want)), ops
    composed = imaging.Compose([imaging.RandomResizedCrop(40, generator=imaging.Generator(1)),
                                imaging.RandomHorizontalFlip(), transform])
    assert len(composed._steps) == 1 and composed(_png(textured(1, 90, 80))).shape == (40, 40, 3)
    with pytest.raises(ValueError, match="hparams .* are not supported"):
        imaging.rand_augment_transform("rand-m9", {"magnitude_std": 0.5})
    with pytest.raises(ValueError, match="not a timm RandAugment string"):
        imaging.rand_augment_transform("ta_wide")


def _png(array):
    import io
    out = io.BytesIO()
    Image.fromarray(array).save(out, "PNG")
    return out.getvalue()
