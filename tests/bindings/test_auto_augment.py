"""torchvision's automatic augmentation policies (TrivialAugmentWide,
RandAugment, AutoAugment's ImageNet policy): the magnitude bins equal
torch's, the operations and magnitudes drawn follow torchvision's
distribution (chi-square over 20,000 draws each), and the drawn operations
give torchvision's pixels when applied."""
import collections
import math
import unittest.mock

import numpy as np
import pytest

from pictures import textured
from statistics_tests import chi_square_p
from tensorcom import _tensorcom as C

torch = pytest.importorskip("torch")
autoaugment = pytest.importorskip("torchvision.transforms.autoaugment")
from torchvision.transforms import InterpolationMode  # noqa: E402
from PIL import Image  # noqa: E402

DRAWS = 20000
POLICIES = {
    "ta_wide": lambda: autoaugment.TrivialAugmentWide(),
    "ra": lambda: autoaugment.RandAugment(),
    "imagenet": lambda: autoaugment.AutoAugment(autoaugment.AutoAugmentPolicy.IMAGENET),
}


def torchvision_draws(policy, width, height, count):
    """What torchvision's forward() asks _apply_op for, image by image."""
    torch.manual_seed(5)
    transform = POLICIES[policy]()
    image = Image.new("RGB", (width, height))
    draws, current = [], []

    def record(img, op_name, magnitude, interpolation, fill):
        current.append((op_name, round(magnitude, 6)))
        return img

    with unittest.mock.patch.object(autoaugment, "_apply_op", record):
        for _ in range(count):
            current = []
            transform(image)
            draws.append(tuple(current))
    return draws


def our_draws(policy, width, height, count):
    return [tuple((name, round(m, 6)) for name, m in C.auto_augment_draw(policy, width, height, 11, i))
            for i in range(count)]


@pytest.mark.parametrize("start, end, steps", [
    (0, 0.99, 31), (0, 32, 31), (0, 135, 31), (255, 0, 31), (0, 0.3, 31), (0, 30, 31), (0, 0.9, 31),
    (0, 0.3, 10), (0, 30, 10), (0, 0.9, 10), (255, 0, 10), (0, 1, 2), (0, 1, 1), (0, 7, 33), (0, 7, 64)]
    + [(0, 150 / 331 * s, 31) for s in (1, 17, 160, 176, 224, 225, 331, 999)])
def test_magnitude_bins_equal_torch_linspace(start, end, steps):
    want = torch.linspace(start, end, steps).numpy()
    got = np.array(C._torch_linspace(start, end, steps), np.float32)
    assert np.array_equal(got, want), [(i, want[i], got[i]) for i in range(steps) if want[i] != got[i]]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_operations_and_magnitudes_follow_torchvision(policy):
    width, height = 176, 150  # RandAugment's translations scale with the size
    ours = our_draws(policy, width, height, DRAWS)
    theirs = torchvision_draws(policy, width, height, DRAWS)
    # Every single operation drawn, with its signed magnitude.
    single_ours = collections.Counter(op for draw in ours for op in draw)
    single_theirs = collections.Counter(op for draw in theirs for op in draw)
    assert set(single_ours) == set(single_theirs), set(single_ours) ^ set(single_theirs)
    p, categories = chi_square_p(single_ours, single_theirs)
    assert p > 0.01, (p, categories)
    # The operations alone, and the signs alone: fewer categories, so a
    # small bias in either shows (a fifth fewer Identity draws gives p < 0.001).
    for part in (lambda op: op[0], lambda op: math.copysign(1.0, op[1])):
        p, categories = chi_square_p(collections.Counter(part(op) for draw in ours for op in draw),
                                     collections.Counter(part(op) for draw in theirs for op in draw))
        assert p > 0.01, (p, categories)
    # How many operations an image gets (AutoAugment applies each half with its probability).
    p, categories = chi_square_p(collections.Counter(map(len, ours)), collections.Counter(map(len, theirs)))
    assert p > 0.01 or categories == 1, (p, categories)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
def test_drawn_operations_give_torchvision_pixels(policy, interpolation):
    mode = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR}[interpolation]
    rng = np.random.default_rng(3)
    for sequence in range(60):
        height, width = int(rng.integers(1, 90)), int(rng.integers(1, 90))
        pixels = textured(rng, height, width)
        ops = C.auto_augment_draw(policy, width, height, 4, sequence)
        want = Image.fromarray(pixels)
        for name, magnitude in ops:
            want = autoaugment._apply_op(want, name, magnitude, mode, None)
        got = pixels.copy()
        C.auto_augment_apply(got, ops, interpolation=interpolation)
        assert np.array_equal(got, np.asarray(want)), (policy, ops, pixels.shape)


def test_draws_are_the_samples_own():
    first = [C.auto_augment_draw("ra", 224, 224, 1, i) for i in range(50)]
    assert first == [C.auto_augment_draw("ra", 224, 224, 1, i) for i in range(50)]
    assert first != [C.auto_augment_draw("ra", 224, 224, 2, i) for i in range(50)]


@pytest.mark.parametrize("kwargs, message", [
    ({"policy": "randaug"}, "unknown augmentation policy 'randaug'"),
    ({"policy": "ra", "magnitude": 31}, "RandAugment's magnitude must be from 0 to 30"),
    ({"policy": "ra", "magnitude": -1}, "RandAugment's magnitude must be from 0 to 30"),
    ({"policy": "ra", "num_ops": 17}, "RandAugment's number of operations must be from 0 to 16"),
    ({"policy": "ta_wide", "num_magnitude_bins": 1}, "the number of magnitude bins must be from 2 to 1000"),
])
def test_bad_policy_arguments_are_refused_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        C.auto_augment_draw(width=32, height=32, seed=0, sequence=0, **kwargs)
