"""The image operations' hook refuses what it cannot work on in place, by
name: bad arguments, other dtypes (never changed in a converted copy),
read-only or strided arrays. No torchvision needed: this runs under NumPy 2
too (scripts/lab/numpy2-test)."""
import numpy as np
import pytest

from tensorcom import _tensorcom as C


@pytest.mark.parametrize("name, argument, message", [
    ("posterize", 9, "posterize: bits must be an integer from 0 to 8"),
    ("posterize", 2.5, "posterize: bits must be an integer from 0 to 8"),
    ("contrast", -0.5, "contrast: the factor must not be negative"),
    ("brightness", float("nan"), "brightness: the argument must be finite"),
    ("hue", 0.6, r"hue: the factor must be in \[-0.5, 0.5\]"),
    ("swirl", 1.0, "no image operation named 'swirl'"),
])
def test_bad_arguments_are_refused_naming_them(name, argument, message):
    image = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match=message):
        C.image_op(name, image, argument)


def test_bad_geometric_options_are_refused_naming_them():
    image = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="interpolation must be 'nearest', 'bilinear' or 'bicubic', not 'lanczos'"):
        C.image_op("rotate", image, 10.0, interpolation="lanczos")
    with pytest.raises(ValueError, match="fill values must be from 0 to 255"):
        C.image_op("rotate", image, 10.0, fill=(0, 256, 0))


def test_only_writable_contiguous_rgb_images_are_taken():
    with pytest.raises(ValueError, match=r"uint8 \(H, W, 3\)"):
        C.image_op("invert", np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="C-contiguous"):
        C.image_op("invert", np.zeros((4, 8, 3), np.uint8)[:, ::2])
    frozen = np.zeros((4, 4, 3), np.uint8)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        C.image_op("invert", frozen)
    with pytest.raises(ValueError, match=r"uint8 \(H, W, 3\)"):  # never changed in a converted copy
        C.image_op("invert", np.zeros((4, 4, 3), np.float32))
