"""tensorcom.imaging's TrivialAugmentWide, RandAugment and AutoAugment:
alone on arrays and fused after RandomResizedCrop + flip in one engine call,
torchvision's pixels for the operations they report; torchvision's own
policies taken over with their arguments; pickled for spawn workers; and
what they do not support refused by name."""
import io
import pickle

import numpy as np
import pytest

from pictures import textured
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
    (lambda: imaging.TrivialAugmentWide(interpolation=T.InterpolationMode.BICUBIC),
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
