"""tensorcom.imaging's TrivialAugmentWide, RandAugment and AutoAugment:
alone on arrays and fused after RandomResizedCrop + flip in one engine call,
torchvision's pixels for the operations they report; torchvision's own
policies taken over with their arguments; pickled for spawn workers; and
what they do not support refused by name."""
import collections
import io
import pickle

import numpy as np
import pytest

from pictures import textured
from statistics_tests import chi_square_p, ks_critical, ks_statistic
from tensorcom import _tensorcom as C
from tensorcom import imaging

autoaugment = pytest.importorskip("torchvision.transforms.autoaugment")
T = pytest.importorskip("torchvision.transforms")
from PIL import Image  # noqa: E402

POLICIES = [imaging.TrivialAugmentWide, imaging.RandAugment, imaging.AutoAugment]
MODES = {"nearest": T.InterpolationMode.NEAREST, "bilinear": T.InterpolationMode.BILINEAR}


def encode(array):
    out = io.BytesIO()
    Image.fromarray(array).save(out, "PNG")  # lossless: the crop decodes as PIL decodes it
    return out.getvalue()


def torchvision_applied(array, ops, interpolation, fill=None):
    image = Image.fromarray(array)
    for name, magnitude in ops:
        image = autoaugment._apply_op(image, name, magnitude, MODES[interpolation], fill)
    return np.asarray(image)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
def test_fused_after_the_crop_the_reported_operations_give_its_pixels(policy, interpolation):
    data = encode(textured(5, 150, 211))
    engine = C.ImageTransform(96, 96, False, [0, 0, 0, 0], [0.08, 1.0], [3 / 4, 4 / 3], 0.5, "bilinear",
                              imaging.MAX_PIXELS, **policy(interpolation=interpolation)._engine_args())
    fused = imaging.Compose([imaging.RandomResizedCrop(96, generator=imaging.Generator(8)),
                             imaging.RandomHorizontalFlip(), policy(interpolation=interpolation)])
    seen = set()
    for sequence in range(40):
        out, ops = engine.augment_recorded(data, 8, sequence)
        crop = imaging.Compose([imaging.RandomResizedCrop(96, generator=_one_draw(8, sequence)),
                                imaging.RandomHorizontalFlip()])(data)
        assert np.array_equal(out, torchvision_applied(crop, ops, interpolation)), (sequence, ops)
        assert np.array_equal(fused(data), out)
        seen.update(name for name, _ in ops)
    assert len(seen) >= 4, seen


class _one_draw(imaging.Generator):
    """A generator whose next draw is (seed, sequence)."""

    def __init__(self, seed, sequence):
        super().__init__(seed)
        self._pair = (seed, sequence)

    def draw(self):
        return self._pair


@pytest.mark.parametrize("policy", POLICIES)
def test_alone_on_an_array_its_drawn_operations_give_its_pixels(policy):
    array = textured(2, 64, 80)
    transform = policy(generator=imaging.Generator(3), fill=(10, 20, 30))
    for _ in range(30):
        ops = transform.draw_ops(80, 64)
        got = transform.apply_ops(array, ops)
        assert np.array_equal(got, torchvision_applied(array, ops, "nearest", fill=[10, 20, 30]))
    out = transform(array)
    assert out.shape == array.shape and out is not array


def test_torchvisions_policies_are_taken_over_with_their_arguments():
    composed = imaging.from_torchvision(T.Compose([
        T.RandomResizedCrop(176), T.RandomHorizontalFlip(),
        T.TrivialAugmentWide(interpolation=T.InterpolationMode.BILINEAR),
        T.RandAugment(num_ops=3, magnitude=7), T.AutoAugment(), T.PILToTensor()]))
    ta, ra, aa = composed.transforms[2:5]
    assert isinstance(ta, imaging.TrivialAugmentWide) and ta.interpolation == "bilinear"
    assert isinstance(ra, imaging.RandAugment) and (ra.num_ops, ra.magnitude) == (3, 7)
    assert isinstance(aa, imaging.AutoAugment) and aa.policy == "imagenet"
    out = composed(encode(textured(1, 200, 240)))
    assert tuple(out.shape) == (3, 176, 176)


@pytest.mark.parametrize("make, message", [
    (lambda: imaging.TrivialAugmentWide(interpolation=T.InterpolationMode.LANCZOS),
     "interpolation .* is not supported"),
    (lambda: imaging.AutoAugment(autoaugment.AutoAugmentPolicy.CIFAR10), "policy .* is not supported"),
    (lambda: imaging.RandAugment(magnitude=31), "RandAugment's magnitude must be from 0 to 30"),
    (lambda: imaging.RandAugment(fill="grey"), "fill must be None, a number or a sequence"),
])
def test_what_is_not_supported_is_refused_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_policy_takes_arrays_only():
    with pytest.raises(TypeError, match=r"takes a uint8 \(H, W, 3\) array"):
        imaging.TrivialAugmentWide()(Image.new("RGB", (4, 4)))


@pytest.mark.parametrize("policy", POLICIES)
def test_pickled_compose_with_a_policy_gives_the_same_pixels(policy):
    data = encode(textured(7, 120, 100))
    make = lambda: imaging.Compose([imaging.RandomResizedCrop(64, generator=imaging.Generator(4)),  # noqa: E731
                                    imaging.RandomHorizontalFlip(), policy()])
    original = make()
    copy = pickle.loads(pickle.dumps(make()))
    for _ in range(10):
        assert np.array_equal(original(data), copy(data))


def remade_by_functional(array, ops):
    F = pytest.importorskip("torchvision.transforms.functional")
    image = Image.fromarray(array)
    for name, argument in ops:
        image = getattr(F, name)(image, int(argument) if name == "rgb_to_grayscale" else argument)
    return np.asarray(image)


def test_color_jitter_and_grayscale_give_torchvisions_pixels_for_their_draws():
    array = textured(9, 70, 90)
    jitter = imaging.ColorJitter(0.4, (0.5, 1.5), 0.4, 0.2, generator=imaging.Generator(1))
    grey = imaging.RandomGrayscale(0.5, generator=imaging.Generator(2))
    greys = 0
    for _ in range(40):
        ops = jitter.draw_ops() + grey.draw_ops()
        greys += any(name == "rgb_to_grayscale" for name, _ in ops)
        assert np.array_equal(jitter.apply_ops(array, ops), remade_by_functional(array, ops)), ops
    assert 0 < greys < 40


def test_color_jitter_draws_follow_torchvision():
    """The order is a uniform permutation (chi-square over the 24) and each
    factor uniform over its range (Kolmogorov-Smirnov against torch's draws)."""
    torch = pytest.importorskip("torch")
    jitter = imaging.ColorJitter(0.4, 0.3, 0.2, 0.1, generator=imaging.Generator(6))
    ours = [jitter.draw_ops() for _ in range(20000)]
    torch.manual_seed(0)
    ranges = [(0.6, 1.4), (0.7, 1.3), (0.8, 1.2), (-0.1, 0.1)]
    names = ["adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue"]
    theirs = [T.ColorJitter.get_params(*ranges) for _ in range(20000)]
    p, categories = chi_square_p(collections.Counter(tuple(n for n, _ in ops) for ops in ours),
                                 collections.Counter(tuple(names[int(i)] for i in draw[0]) for draw in theirs))
    assert p > 0.01 and categories == 24, (p, categories)
    for index, name in enumerate(names):
        mine = [dict(ops)[name] for ops in ours]
        torch_draws = [draw[1 + index] for draw in theirs]
        assert ks_statistic(mine, torch_draws) < ks_critical(len(mine), len(torch_draws)), name
        assert ranges[index][0] <= min(mine) and max(mine) <= ranges[index][1]


def test_fused_jitter_and_grayscale_report_what_they_did():
    data = encode(textured(3, 120, 160))
    engine = C.ImageTransform(64, 64, False, [0, 0, 0, 0], [0.08, 1.0], [3 / 4, 4 / 3], 0.5, "bilinear",
                              imaging.MAX_PIXELS, jitter=[0.6, 1.4, 0.6, 1.4, 0.6, 1.4, -0.1, 0.1],
                              grayscale_probability=0.3)
    fused = imaging.Compose([imaging.RandomResizedCrop(64, generator=imaging.Generator(5)),
                             imaging.RandomHorizontalFlip(), imaging.ColorJitter(0.4, 0.4, 0.4, 0.1),
                             imaging.RandomGrayscale(0.3)])
    assert len(fused._steps) == 1
    for sequence in range(30):
        out, ops = engine.augment_recorded(data, 5, sequence)
        crop = imaging.Compose([imaging.RandomResizedCrop(64, generator=_one_draw(5, sequence)),
                                imaging.RandomHorizontalFlip()])(data)
        assert np.array_equal(out, remade_by_functional(crop, ops)), ops
        assert np.array_equal(fused(data), out)


def test_torchvisions_color_jitter_is_taken_over():
    composed = imaging.from_torchvision(T.Compose([T.RandomResizedCrop(64), T.ColorJitter(0.4, 0.2, 0.1, 0.05),
                                                   T.RandomGrayscale(0.2)]))
    jitter, grey = composed.transforms[1:]
    assert jitter.brightness == (0.6, 1.4) and jitter.hue == (-0.05, 0.05) and grey.p == 0.2
    with pytest.raises(ValueError, match="hue values should be between"):
        imaging.ColorJitter(hue=(-0.6, 0.1))
    with pytest.raises(ValueError, match="must be non negative"):
        imaging.ColorJitter(brightness=-1)


def test_random_erasing_boxes_follow_torchvision():
    """Whether a box is drawn, and its height, width and place, as
    torchvision's RandomErasing draws them (Kolmogorov-Smirnov)."""
    torch = pytest.importorskip("torch")
    height, width = 176, 150
    ours = imaging.RandomErasing(p=0.7, generator=imaging.Generator(2))
    mine = [ours.get_params(width, height) for _ in range(20000)]
    torch.manual_seed(1)
    image = torch.zeros(3, height, width)
    theirs = []
    for _ in range(20000):
        if torch.rand(1) < 0.7:
            i, j, h, w, v = T.RandomErasing.get_params(image, (0.02, 0.33), (0.3, 3.3), [0.0])
            theirs.append(None if v is image else [i, j, h, w])
        else:
            theirs.append(None)
    drawn = [b for b in mine if b is not None]
    drawn_theirs = [b for b in theirs if b is not None]
    p, _ = chi_square_p(collections.Counter(b is None for b in mine), collections.Counter(b is None for b in theirs))
    assert p > 0.01, p
    for k in range(4):
        assert ks_statistic([b[k] for b in drawn], [b[k] for b in drawn_theirs]) < ks_critical(
            len(drawn), len(drawn_theirs)), k
    assert all(0 <= t and 0 <= l and t + h <= height and l + w <= width for t, l, h, w in drawn)


def test_erase_boxes_writes_values_as_torchvision_erase():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.functional")
    batch = torch.randn(3, 3, 20, 24)
    boxes = [[2, 3, 5, 6], [], [0, 0, 20, 1]]
    want = batch.clone()
    want[0] = F.erase(want[0], 2, 3, 5, 6, torch.tensor([0.0])[:, None, None])
    want[2] = F.erase(want[2], 0, 0, 20, 1, torch.tensor([0.0])[:, None, None])
    assert torch.equal(imaging.erase_boxes(batch.clone(), boxes), want)
    noisy = imaging.erase_boxes(batch.clone(), boxes, "random")
    assert torch.equal(noisy[1], batch[1]) and not torch.equal(noisy[0], batch[0])
    per_channel = imaging.erase_boxes(np.zeros((1, 3, 4, 4), np.float32), [[1, 1, 2, 2]], (1.0, 2.0, 3.0))
    assert per_channel[0, 2, 1, 1] == 3.0 and per_channel[0, 0, 0, 0] == 0.0
    with pytest.raises(ValueError, match="outside a 20x24 image"):
        imaging.erase_boxes(batch.clone(), [[19, 0, 2, 2], [], []])


def test_torchvisions_random_erasing_is_taken_over():
    composed = imaging.from_torchvision(T.Compose([T.RandomErasing(p=0.25, value="random")]))
    erasing = composed.transforms[0]
    assert isinstance(erasing, imaging.RandomErasing) and erasing.p == 0.25 and erasing.value == "random"
    with pytest.raises(ValueError, match="scale must be"):
        imaging.RandomErasing(scale=(0.5, 0.2))
