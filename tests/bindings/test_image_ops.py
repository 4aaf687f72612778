"""The augmentation policies' operations against torchvision on PIL images:
equal bit for bit, for every operation over a spread of magnitudes (the
geometric ones through torchvision's own _apply_op, nearest, bilinear and bicubic,
with and without a fill colour), on textured images of awkward sizes down
to 1x1 and one-pixel-thin strips."""
import numpy as np
import pytest

from pictures import textured
from tensorcom import _tensorcom as C

F = pytest.importorskip("torchvision.transforms.functional")
autoaugment = pytest.importorskip("torchvision.transforms.autoaugment")
from torchvision.transforms import InterpolationMode  # noqa: E402
from PIL import Image  # noqa: E402  (python3-pil comes with torchvision)

SIZES = [(1, 1), (1, 9), (9, 1), (2, 2), (3, 3), (17, 5), (64, 48), (150, 201), (224, 224)]
FACTORS = [0.0, 0.1, 0.37, 0.5, 0.99, 1.0, 1.3, 1.9, 4.0]
CASES = {
    "invert": [(0, lambda im, a: F.invert(im))],
    "posterize": [(b, lambda im, a: F.posterize(im, int(a))) for b in range(0, 9)],
    "solarize": [(t, lambda im, a: F.solarize(im, a)) for t in (0.0, 17.3, 100.0, 128.0, 200.5, 255.0, 256.0)],
    "autocontrast": [(0, lambda im, a: F.autocontrast(im))],
    "equalize": [(0, lambda im, a: F.equalize(im))],
    "brightness": [(f, lambda im, a: F.adjust_brightness(im, a)) for f in FACTORS],
    "saturation": [(f, lambda im, a: F.adjust_saturation(im, a)) for f in FACTORS],
    "contrast": [(f, lambda im, a: F.adjust_contrast(im, a)) for f in FACTORS],
    "sharpness": [(f, lambda im, a: F.adjust_sharpness(im, a)) for f in FACTORS],
    "hue": [(f, lambda im, a: F.adjust_hue(im, a)) for f in (-0.5, -0.3, -0.05, -0.001, 0.0, 0.1, 0.25, 0.5)],
    "grayscale": [(0, lambda im, a: F.to_grayscale(im, 3))],
}


def images():
    rng = np.random.default_rng(7)
    out = [textured(rng, h, w) for h, w in SIZES]
    # Flat and two-valued images: the degenerate histograms of autocontrast and equalize.
    out.append(np.full((12, 10, 3), 77, np.uint8))
    two = np.zeros((8, 8, 3), np.uint8)
    two[::2] = 200
    out.append(two)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_torchvision_on_pil_bit_for_bit(name):
    for argument, reference in CASES[name]:
        for pixels in images():
            want = np.asarray(reference(Image.fromarray(pixels), argument))
            got = pixels.copy()
            C.image_op(name, got, float(argument))
            assert np.array_equal(got, want), (name, argument, pixels.shape,
                                               int(np.abs(got.astype(int) - want).max()))


GEOMETRIC = {
    "shear_x": ("ShearX", [0.0, -0.0, 0.033, -0.3, 0.5, 0.99, -0.99]),
    "shear_y": ("ShearY", [0.0, 0.033, -0.3, 0.5, 0.99, -0.99]),
    "translate_x": ("TranslateX", [0.0, 1.07, -3.2, 16.0, -32.0, 67.6, 500.0]),
    "translate_y": ("TranslateY", [0.0, 1.07, -3.2, 16.0, -32.0, 67.6, 500.0]),
    "rotate": ("Rotate", [0.0, -0.0, 4.5, -30.0, 90.0, -90.0, 135.0, 180.0, -180.0, 270.0, 45.5, 1e-20]),
}
INTERPOLATIONS = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR,
                  "bicubic": InterpolationMode.BICUBIC}


@pytest.mark.parametrize("name", sorted(GEOMETRIC))
@pytest.mark.parametrize("interpolation", sorted(INTERPOLATIONS))
@pytest.mark.parametrize("fill", [None, (124, 116, 104)])
def test_geometric_operations_equal_torchvision_on_pil(name, interpolation, fill):
    op_name, magnitudes = GEOMETRIC[name]
    for magnitude in magnitudes:
        for pixels in images():
            want = np.asarray(autoaugment._apply_op(Image.fromarray(pixels), op_name, magnitude,
                                                    INTERPOLATIONS[interpolation], fill))
            got = pixels.copy()
            C.image_op(name, got, magnitude, interpolation=interpolation, fill=fill or (0, 0, 0))
            assert np.array_equal(got, want), (name, magnitude, interpolation, fill, pixels.shape,
                                               int((got != want).any(-1).sum()))
