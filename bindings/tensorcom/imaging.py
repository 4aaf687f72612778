"""tensorcom.imaging: torchvision's transforms on encoded images, in C++.

Swap torchvision's PIL transforms for these and keep the rest of the
DataLoader: they take the image's encoded bytes (a JPEG, PNG, PNM, BMP or
WebP file's contents, as an ImageFolder loader or a webdataset tar yields
them) and return uint8 HWC numpy arrays with torchvision's pixels:

    from tensorcom import imaging

    train = imaging.Compose([
        imaging.RandomResizedCrop(224),
        imaging.RandomHorizontalFlip(),
        imaging.PILToTensor(),            # uint8 CHW torch tensor, as torchvision's
    ])
    val = imaging.Compose([imaging.Resize(256), imaging.CenterCrop(224)])
    dataset = torchvision.datasets.ImageFolder(root, transform=train, loader=imaging.read_bytes)

A Compose fuses RandomResizedCrop + RandomHorizontalFlip, and Resize +
CenterCrop, into one call that decodes only the pixels the output needs (for
JPEGs: only the crop, at a reduced DCT scale where the filter leaves room,
and only the restart intervals it touches when the file has restart markers).
The GIL is released while the C++ works, so threads scale too.

Randomness: each transform draws its crops and flips from a Generator, one
(seed, sequence) pair per image, as the augmentation servers do. Without a
seed it follows torch's seed when torch is loaded, as torchvision's
transforms do: torch.manual_seed(s) restarts it, and every DataLoader worker
of every epoch draws its own stream (DataLoader seeds them from the main
process' generator), so a seeded run repeats and its epochs differ. A
Generator(seed) fixes the stream of a process without torch; inside
DataLoader workers it is mixed with the worker's seed in the same way.

torchvision's own RandomResizedCrop, RandomHorizontalFlip, Resize,
CenterCrop and PILToTensor may be given to Compose (or a whole torchvision
Compose to from_torchvision): they are replaced by these, with their
arguments.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _tensorcom as _tc
from ._tensorcom import ArgumentError, ImageError  # noqa: F401
# The Generator lives in its own module, which the batch transforms share;
# _the_default_generator stays importable here for pickles.
from .generators import Generator, GeneratorLike, _generator, _the_default_generator  # noqa: F401

__all__ = [
    "decode", "image_size", "image_format", "read_bytes", "is_image_file", "IMG_EXTENSIONS", "Generator", "Compose",
    "from_torchvision", "RandomResizedCrop", "RandomHorizontalFlip", "Resize", "CenterCrop", "PILToTensor",
    "TrivialAugmentWide", "RandAugment", "AutoAugment", "AutoAugmentPolicy", "ColorJitter", "RandomGrayscale",
    "RandomErasing", "erase_boxes", "rand_augment_transform", "ImageError", "MAX_PIXELS", "MixUp", "CutMix",
    "MixUpOrCutMix", "Mixup", "mix_targets", "served_mixes",
]

# The files these transforms decode (torchvision's ImageFolder also lists
# .tif and .gif, which they do not): ImageFolder(..., is_valid_file=is_image_file).
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".pgm", ".pbm", ".pnm", ".bmp", ".webp")

# Larger images are refused with ImageError (problem "too many pixels"):
# a small file can declare gigabytes of pixels.
MAX_PIXELS = 1 << 28

# Encoded image bytes; a size (an int, or (height, width)); a file name.
Encoded = Union[bytes, bytearray, memoryview, np.ndarray]
Size = Union[int, Sequence[int]]
Path = Union[str, "os.PathLike[str]"]

_INTERPOLATIONS = {"bilinear": "bilinear", "bicubic": "bicubic", "fast": "fast", 2: "bilinear", 3: "bicubic"}


def _named_interpolation(interpolation, names, refusal):
    """torchvision's InterpolationMode, PIL's constants or a name, as the engine's name in names."""
    key = getattr(interpolation, "value", interpolation)
    if isinstance(key, str):
        key = key.lower()
    if key not in names:
        raise ValueError(refusal)
    return names[key]


def _interpolation_name(interpolation):
    return _named_interpolation(interpolation, _INTERPOLATIONS, f"interpolation {interpolation!r}: tensorcom.imaging "
                                "has bilinear, bicubic (Pillow's, torchvision's pixels) and fast")


def _size_pair(size, name):
    """(height, width) from torchvision's int-or-sequence size."""
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        pair = (int(size), int(size))
    elif isinstance(size, (tuple, list)) and len(size) == 1:
        pair = (int(size[0]), int(size[0]))
    elif isinstance(size, (tuple, list)) and len(size) == 2:
        pair = (int(size[0]), int(size[1]))
    else:
        raise TypeError(f"{name}: size must be an int or a sequence of one or two ints, not {size!r}")
    if pair[0] <= 0 or pair[1] <= 0:
        raise ValueError(f"{name}: size must be positive, not {size!r}")
    return pair


def _range_pair(values, name):
    try:
        low, high = (float(v) for v in values)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of two numbers, not {values!r}") from None
    if not (0 < low <= high) or not np.isfinite(high):
        raise ValueError(f"{name} must be two numbers with 0 < low <= high, not {values!r}")
    return low, high


def _check_encoded(data, name):
    if isinstance(data, np.ndarray) and data.ndim > 1:
        raise TypeError(f"{name} takes encoded image bytes (a file's contents), not a decoded array; "
                        "for decoded images use torchvision's transform of that name")
    if not isinstance(data, (bytes, bytearray, memoryview, np.ndarray)):
        raise TypeError(f"{name} takes encoded image bytes (bytes, bytearray, memoryview or a uint8 array), "
                        f"not {type(data).__name__}; a PIL image is decoded already: use torchvision's transform")
    return data


def read_bytes(path: Path) -> bytes:
    """An ImageFolder loader: the file's bytes, undecoded (these transforms decode them)."""
    with open(path, "rb") as f:
        return f.read()


def is_image_file(path: Path) -> bool:
    """Whether ImageFolder should list path: its extension is one of IMG_EXTENSIONS."""
    return str(path).lower().endswith(IMG_EXTENSIONS)


def decode(data: Encoded) -> np.ndarray:
    """The whole image as a uint8 (height, width, 3) RGB array, for every
    format the servers accept (JPEG, PNG, PNM, BMP, WebP; greyscale, CMYK,
    16-bit and alpha images come out RGB uint8). Raises ImageError."""
    return _decoder().decode(_check_encoded(data, "decode"))


def image_size(data: Encoded) -> Tuple[int, int]:
    """(width, height) from the image's header, without decoding."""
    return _tc.image_size(_check_encoded(data, "image_size"))


def image_format(data: Encoded) -> str:
    """'jpeg', 'png', 'pnm', 'bmp', 'webp' or 'unknown', from the first bytes."""
    return _tc.image_format(_check_encoded(data, "image_format"))


_decoders: Dict[int, Any] = {}  # pid -> the C++ engine


def _decoder():
    """The engine behind decode(), one a process."""
    key = os.getpid()
    transform = _decoders.get(key)
    if transform is None:
        transform = _tc.ImageTransform(1, 1, False, [0, 0, 0, 0], [0.08, 1.0], [0.75, 4 / 3], 0.0, "bilinear",
                                       MAX_PIXELS)
        _decoders[key] = transform
    return transform


class RandomResizedCrop:
    """torchvision.transforms.RandomResizedCrop on encoded bytes: a box of
    `scale` of the area and aspect `ratio`, resized to `size`. antialias is
    accepted for torchvision's signature; like PIL, the filters always
    antialias."""

    def __init__(self, size: Size, scale: Tuple[float, float] = (0.08, 1.0),
                 ratio: Tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0), interpolation: Any = "bilinear",
                 antialias: bool = True, generator: GeneratorLike = None) -> None:
        self.size = _size_pair(size, "RandomResizedCrop")
        self.scale = _range_pair(scale, "scale")
        if self.scale[1] > 1:
            raise ValueError(f"scale must lie in (0, 1], not {scale!r}")
        self.ratio = _range_pair(ratio, "ratio")
        self.interpolation = _interpolation_name(interpolation)
        self.antialias = antialias
        self.generator = _generator(generator)
        self._engine = _Fused(self, None)

    @staticmethod
    def get_params(img: Any, scale: Tuple[float, float], ratio: Tuple[float, float],
                   generator: GeneratorLike = None) -> Tuple[int, int, int, int]:
        """(top, left, height, width) of a crop of img (encoded bytes, or a
        decoded HWC array), as torchvision's get_params returns them."""
        width, height = _width_height(img)
        seed, sequence = _generator(generator).draw()
        x, y, w, h = _tc.random_resized_crop(width, height, _range_pair(scale, "scale"), _range_pair(ratio, "ratio"),
                                             seed, sequence)
        return y, x, h, w

    def crop(self, data: Encoded, top: int, left: int, height: int, width: int, flip: bool = False) -> Any:
        """The box get_params gave, resized to size (and mirrored if flip)."""
        out_h, out_w = self.size
        return self._engine.transform.render(_check_encoded(data, "RandomResizedCrop"), [left, top, width, height],
                                             [out_w, out_h], [0, 0, out_w, out_h], bool(flip))

    def __call__(self, data: Encoded) -> Any:
        return self._engine(data)

    # The C++ engine is not pickled: it is made anew where the transform is
    # loaded (DataLoader workers started by spawn or forkserver).
    def __getstate__(self):
        return _without(self.__dict__, "_engine")

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._engine = _Fused(self, None)

    def __repr__(self):
        return (f"{type(self).__name__}(size={self.size}, scale={self.scale}, ratio={self.ratio}, "
                f"interpolation={self.interpolation})")


class RandomHorizontalFlip:
    """torchvision.transforms.RandomHorizontalFlip: after a RandomResizedCrop
    in a Compose, fused into its call (the flip then drawn from the crop's
    generator, after the crop, as the servers draw it); alone, flips a
    decoded HWC array (or a torch CHW tensor), or decodes encoded bytes
    first."""

    def __init__(self, p: float = 0.5, generator: GeneratorLike = None) -> None:
        p = float(p)
        if not 0 <= p <= 1:
            raise ValueError(f"RandomHorizontalFlip: p must lie in [0, 1], not {p!r}")
        self.p = p
        self.generator = _generator(generator)

    def _draw(self):
        seed, sequence = self.generator.draw()
        return np.random.default_rng([seed, sequence]).random() < self.p

    def __call__(self, image: Any) -> Any:
        if isinstance(image, (bytes, bytearray, memoryview)):
            image = decode(image)
        if not self._draw():
            return image
        if isinstance(image, np.ndarray):
            return np.ascontiguousarray(image[:, ::-1])
        return image.flip(-1)  # a torch tensor, CHW

    def __repr__(self):
        return f"{type(self).__name__}(p={self.p})"


class Resize:
    """torchvision.transforms.Resize on encoded bytes: an int resizes the
    shorter side to it (the longer at most max_size), a pair (h, w) resizes
    to exactly that. Followed by a CenterCrop in a Compose, only the crop's
    pixels are computed."""

    def __init__(self, size: Size, interpolation: Any = "bilinear", max_size: Optional[int] = None,
                 antialias: bool = True) -> None:
        if isinstance(size, (int, np.integer)) or (isinstance(size, (tuple, list)) and len(size) == 1):
            shorter = _size_pair(size, "Resize")[0]
            self.spec = [shorter, 0, 0, 0 if max_size is None else int(max_size)]
            if max_size is not None and max_size <= shorter:
                raise ValueError(f"Resize: max_size ({max_size}) must be larger than size ({shorter})")
        else:
            if max_size is not None:
                raise ValueError("Resize: max_size goes with an int size only, as in torchvision")
            height, width = _size_pair(size, "Resize")
            self.spec = [0, width, height, 0]
        self.size = size
        self.max_size = max_size
        self.interpolation = _interpolation_name(interpolation)
        self.antialias = antialias
        self._transform: Any = None

    def _engine(self):
        if self._transform is None:
            self._transform = _tc.ImageTransform(1, 1, True, self.spec, [0.08, 1.0], [0.75, 4 / 3], 0.0,
                                                 self.interpolation, MAX_PIXELS)
        return self._transform

    def __call__(self, data: Encoded) -> Any:
        return self._engine().resize(_check_encoded(data, "Resize"))

    def __getstate__(self):
        return dict(_without(self.__dict__, "_transform"), _transform=None)  # made on first use

    def __repr__(self):
        return f"{type(self).__name__}(size={self.size}, interpolation={self.interpolation}, max_size={self.max_size})"


class CenterCrop:
    """torchvision.transforms.CenterCrop: after a Resize in a Compose, fused
    into its call; alone, crops a decoded HWC array (encoded bytes are
    decoded first). A crop larger than the image pads it with zeros, as
    torchvision does."""

    def __init__(self, size: Size) -> None:
        self.size = _size_pair(size, "CenterCrop")

    def __call__(self, image: Any) -> Any:
        if isinstance(image, (bytes, bytearray, memoryview)):
            image = decode(image)
        return _center_crop_array(image, self.size)

    def __repr__(self):
        return f"{type(self).__name__}(size={self.size})"


def _center_crop_array(image, size):
    crop_h, crop_w = size
    height, width = image.shape[:2]
    x, y, _, _ = _tc.center_crop(width, height, crop_w, crop_h)
    if x >= 0 and y >= 0 and x + crop_w <= width and y + crop_h <= height:
        return np.ascontiguousarray(image[y:y + crop_h, x:x + crop_w])
    out = np.zeros((crop_h, crop_w) + image.shape[2:], dtype=image.dtype)
    sx, sy = max(x, 0), max(y, 0)
    ex, ey = min(x + crop_w, width), min(y + crop_h, height)
    out[sy - y:ey - y, sx - x:ex - x] = image[sy:ey, sx:ex]
    return out


class PILToTensor:
    """An HWC uint8 array as a CHW uint8 torch tensor (a view, as
    torchvision's PILToTensor returns it); needs torch."""

    def __call__(self, image: Any) -> Any:
        import torch
        return torch.from_numpy(np.asarray(image)).permute(2, 0, 1)

    def __repr__(self):
        return f"{type(self).__name__}()"


# torchvision's policies take nearest (their default), bilinear and bicubic.
_POLICY_INTERPOLATIONS = {"nearest": "nearest", "bilinear": "bilinear", "bicubic": "bicubic", 0: "nearest",
                          2: "bilinear", 3: "bicubic"}


def _policy_interpolation(interpolation, name):
    return _named_interpolation(interpolation, _POLICY_INTERPOLATIONS,
                                f"{name}: interpolation {interpolation!r} is not supported: tensorcom.imaging's "
                                "policies have nearest, bilinear and bicubic (Pillow's, torchvision's pixels)")


def _policy_fill(fill, name):
    """torchvision's fill on PIL images: None is 0; a number or three, each int() and clipped as Pillow does."""
    values: list = [0, 0, 0]
    if fill is None:
        pass
    elif isinstance(fill, (int, float, np.integer, np.floating)) and not isinstance(fill, bool):
        values = [fill] * 3
    elif isinstance(fill, (list, tuple)) and len(fill) in (1, 3):
        values = list(fill) * (3 // len(fill))
    else:
        raise ValueError(f"{name}: fill must be None, a number or a sequence of 1 or 3 numbers, not {fill!r}")
    try:
        return tuple(min(255, max(0, int(v))) for v in values)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}: fill must hold finite numbers, not {fill!r}") from None


class AutoAugmentPolicy:
    """torchvision's AutoAugmentPolicy names; tensorcom.imaging has IMAGENET."""
    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"
    SVHN = "svhn"


class _Policy:
    """An augmentation policy on uint8 HWC arrays (what the crop transforms
    return). Alone, each call draws its operations from the generator and
    applies them to a copy; after RandomResizedCrop (and the flip) in a
    Compose, it joins their one engine call and draws from their generator,
    as the servers do, so that a (seed, sequence) gives the server's pixels."""

    _kind = ""

    def __init__(self, interpolation, fill, generator, num_ops=2, magnitude=9, num_magnitude_bins=31):
        name = type(self).__name__
        self.interpolation = _policy_interpolation(interpolation, name)
        self.fill = fill
        self._fill = _policy_fill(fill, name)
        self.num_ops, self.magnitude, self.num_magnitude_bins = int(num_ops), int(magnitude), int(num_magnitude_bins)
        self.generator = _generator(generator)
        _tc.auto_augment_draw(self._kind, 1, 1, 0, 0, self.num_ops, self.magnitude, self.num_magnitude_bins)

    def draw_ops(self, width: int, height: int) -> list:
        """The operations the next image of width x height gets, drawn from the
        generator: [(torchvision's op name, signed magnitude)], as
        torchvision's _apply_op takes them (the parameters of a call)."""
        seed, sequence = self.generator.draw()
        return _tc.auto_augment_draw(self._kind, width, height, seed, sequence, self.num_ops, self.magnitude,
                                     self.num_magnitude_bins)

    def apply_ops(self, image: np.ndarray, ops: Sequence[Tuple[str, float]]) -> np.ndarray:
        """A copy of a uint8 (H, W, 3) array with ops applied in order."""
        out = np.array(self._rgb(image), copy=True, order="C")
        _tc.auto_augment_apply(out, [(str(n), float(m)) for n, m in ops], self.interpolation, self._fill)
        return out

    def __call__(self, image: Any) -> Any:
        image = self._rgb(image)
        return self.apply_ops(image, self.draw_ops(image.shape[1], image.shape[0]))

    def _rgb(self, image):
        return _checked_rgb(image, type(self).__name__)

    def _engine_args(self):
        return dict(policy=self._kind, policy_num_ops=self.num_ops, policy_magnitude=self.magnitude,
                    policy_bins=self.num_magnitude_bins, policy_interpolation=self.interpolation,
                    policy_fill=list(self._fill))

    def __reduce__(self):
        return type(self)._rebuild, (self.__dict__.copy(),)

    @classmethod
    def _rebuild(cls, state):
        policy = cls.__new__(cls)
        policy.__dict__.update(state)
        return policy


class TrivialAugmentWide(_Policy):
    """torchvision.transforms.TrivialAugmentWide: one operation of 14 an
    image, its magnitude one of num_magnitude_bins, with torchvision's pixels."""

    _kind = "ta_wide"

    def __init__(self, num_magnitude_bins: int = 31, interpolation: Any = "nearest", fill: Any = None,
                 generator: GeneratorLike = None) -> None:
        super().__init__(interpolation, fill, generator, num_magnitude_bins=num_magnitude_bins)

    def __repr__(self):
        return (f"{type(self).__name__}(num_magnitude_bins={self.num_magnitude_bins}, "
                f"interpolation={self.interpolation}, fill={self.fill})")


class RandAugment(_Policy):
    """torchvision.transforms.RandAugment: num_ops operations an image, each
    at bin `magnitude` of num_magnitude_bins, with torchvision's pixels."""

    _kind = "ra"

    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation: Any = "nearest", fill: Any = None, generator: GeneratorLike = None) -> None:
        super().__init__(interpolation, fill, generator, num_ops, magnitude, num_magnitude_bins)

    def __repr__(self):
        return (f"{type(self).__name__}(num_ops={self.num_ops}, magnitude={self.magnitude}, "
                f"num_magnitude_bins={self.num_magnitude_bins}, interpolation={self.interpolation}, fill={self.fill})")


class AutoAugment(_Policy):
    """torchvision.transforms.AutoAugment with its ImageNet policy: one of 25
    sub-policies an image, each of its two operations with its probability."""

    _kind = "imagenet"

    def __init__(self, policy: Any = AutoAugmentPolicy.IMAGENET, interpolation: Any = "nearest", fill: Any = None,
                 generator: GeneratorLike = None) -> None:
        name = str(getattr(policy, "value", policy)).lower()
        if name != AutoAugmentPolicy.IMAGENET:
            raise ValueError(f"AutoAugment: policy {policy!r} is not supported: tensorcom.imaging has the ImageNet "
                             "policy (use torchvision's AutoAugment for CIFAR10 and SVHN)")
        self.policy = AutoAugmentPolicy.IMAGENET
        super().__init__(interpolation, fill, generator)

    def __repr__(self):
        return f"{type(self).__name__}(policy={self.policy}, interpolation={self.interpolation}, fill={self.fill})"


def _jitter_range(value, name, center=1.0, bound=(0.0, float("inf")), clip_first_on_zero=True):
    """torchvision's ColorJitter._check_input: a number or a (min, max) pair; None when off."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        if not value >= 0 or not np.isfinite(value):
            raise ValueError(f"ColorJitter: if {name} is a single number, it must be non negative and finite")
        low, high = center - float(value), center + float(value)
        if clip_first_on_zero:
            low = max(low, 0.0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        low, high = float(value[0]), float(value[1])
        if not bound[0] <= low <= high <= bound[1]:
            raise ValueError(f"ColorJitter: {name} values should be between {bound}")
    else:
        raise TypeError(f"ColorJitter: {name} should be a single number or a list/tuple with length 2")
    return None if low == high == center else (low, high)


class _DrawnSteps:
    """A transform whose draw_ops() gives torchvision.transforms.functional
    calls, applied to a copy of a uint8 HWC array."""

    def draw_ops(self, width: int = 0, height: int = 0) -> list:
        raise NotImplementedError

    def apply_ops(self, image: np.ndarray, ops: Sequence[Tuple[str, float]]) -> np.ndarray:
        out = np.array(_checked_rgb(image, type(self).__name__), copy=True, order="C")
        _tc.auto_augment_apply(out, [(str(n), float(m)) for n, m in ops])
        return out

    def __call__(self, image: Any) -> Any:
        return self.apply_ops(image, self.draw_ops())


class ColorJitter(_DrawnSteps):
    """torchvision.transforms.ColorJitter on uint8 HWC arrays: brightness,
    contrast, saturation and hue adjusted in a random order by factors drawn
    uniformly from their ranges, with torchvision's (Pillow's) pixels. Fused
    after the crop in a Compose as the policies are (after one, if any)."""

    def __init__(self, brightness: Any = 0, contrast: Any = 0, saturation: Any = 0, hue: Any = 0,
                 generator: GeneratorLike = None) -> None:
        self.brightness = _jitter_range(brightness, "brightness")
        self.contrast = _jitter_range(contrast, "contrast")
        self.saturation = _jitter_range(saturation, "saturation")
        self.hue = _jitter_range(hue, "hue", center=0.0, bound=(-0.5, 0.5), clip_first_on_zero=False)
        self.generator = _generator(generator)

    def _ranges(self):
        out = []
        for r in (self.brightness, self.contrast, self.saturation, self.hue):
            out += list(r) if r is not None else [float("nan"), float("nan")]
        return out

    def draw_ops(self, width: int = 0, height: int = 0) -> list:
        """The next image's adjustments: [(torchvision.transforms.functional's name, factor)], in order."""
        seed, sequence = self.generator.draw()
        return _tc.color_jitter_draw(self._ranges(), 0.0, seed, sequence)

    def __repr__(self):
        return (f"{type(self).__name__}(brightness={self.brightness}, contrast={self.contrast}, "
                f"saturation={self.saturation}, hue={self.hue})")


class RandomGrayscale(_DrawnSteps):
    """torchvision.transforms.RandomGrayscale on uint8 HWC arrays: Pillow's
    greyscale in all three channels with probability p."""

    def __init__(self, p: float = 0.1, generator: GeneratorLike = None) -> None:
        if not 0 <= p <= 1:
            raise ValueError(f"RandomGrayscale: p must be a probability from 0 to 1, not {p!r}")
        self.p = float(p)
        self.generator = _generator(generator)

    def draw_ops(self, width: int = 0, height: int = 0) -> list:
        seed, sequence = self.generator.draw()
        return _tc.color_jitter_draw([], self.p, seed, sequence)

    def __repr__(self):
        return f"{type(self).__name__}(p={self.p})"


class RandomErasing:
    """torchvision.transforms.RandomErasing, on the normalised image as
    torchvision applies it: a CHW (or batched NCHW) float torch tensor or
    NumPy array. With probability p a box of a random area (scale) and
    aspect (ratio) gets value: 0, a number, one per channel, or "random"
    (N(0, 1) noise). get_params(width, height) draws the next box
    [top, left, height, width] (or None) from the generator."""

    def __init__(self, p: float = 0.5, scale: Tuple[float, float] = (0.02, 0.33),
                 ratio: Tuple[float, float] = (0.3, 3.3), value: Any = 0, inplace: bool = False,
                 generator: GeneratorLike = None) -> None:
        if not (isinstance(value, (int, float, tuple, list)) or value == "random"):
            raise ValueError(f"RandomErasing: value must be a number, a sequence or 'random', not {value!r}")
        self.p, self.scale, self.ratio = float(p), tuple(scale), tuple(ratio)
        self.value, self.inplace = value, inplace
        self.generator = _generator(generator)
        _tc.random_erasing_draw(1, 1, self.p, list(self.scale), list(self.ratio), 0, 0)  # checks the arguments

    def get_params(self, width: int, height: int) -> Optional[list]:
        seed, sequence = self.generator.draw()
        return _tc.random_erasing_draw(width, height, self.p, list(self.scale), list(self.ratio), seed, sequence)

    def __call__(self, image: Any) -> Any:
        box = self.get_params(image.shape[-1], image.shape[-2])
        if box is None:
            return image
        out = image if self.inplace else image.clone() if hasattr(image, "clone") else image.copy()
        return erase_boxes(out, [box], self.value)

    def __repr__(self):
        return (f"{type(self).__name__}(p={self.p}, scale={self.scale}, ratio={self.ratio}, value={self.value}, "
                f"inplace={self.inplace})")


def erase_boxes(images: Any, boxes: Sequence[Any], value: Any = 0) -> Any:
    """Erases, in place, box i of boxes ([top, left, height, width], or
    empty/None for none) in image i of a normalised float batch (N, C, H, W;
    or one C, H, W image and one box), as torchvision's erase() does: value
    0, a number, one per channel, or "random" (N(0, 1) noise). For a server's
    uint8 batches with --random-erase, after normalising: the boxes are its
    --meta "erase" list. Returns images."""
    batch = images if images.ndim == 4 else images[None]
    if len(boxes) != batch.shape[0]:
        raise ValueError(f"erase_boxes: {len(boxes)} boxes for {batch.shape[0]} images")
    channels = batch.shape[1]
    for image, box in zip(batch, boxes):
        if box is None or len(box) == 0:
            continue
        top, left, height, width = (int(v) for v in box)
        if not (0 <= top and 0 <= left and top + height <= image.shape[-2] and left + width <= image.shape[-1]):
            raise ValueError(f"erase_boxes: box {list(box)} is outside a {image.shape[-2]}x{image.shape[-1]} image")
        region = image[..., top:top + height, left:left + width]
        if isinstance(value, str):
            if value != "random":
                raise ValueError(f"erase_boxes: value must be a number, a sequence or 'random', not {value!r}")
            if hasattr(region, "normal_"):
                region.normal_()
            else:
                region[...] = np.random.default_rng().standard_normal(region.shape)
        elif isinstance(value, (tuple, list)):
            if len(value) not in (1, channels):
                raise ValueError(f"erase_boxes: {len(value)} values for {channels} channels")
            for c in range(channels):
                region[c] = value[c if len(value) > 1 else 0]
        else:
            region[...] = value
    return images


def _checked_rgb(image, name):
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise TypeError(f"{name} takes a uint8 (H, W, 3) array (what tensorcom.imaging's crops return), not "
                        f"{type(image).__name__}; put it before PILToTensor")
    return image


class TimmRandAugment(_Policy):
    """timm's RandAugment from its config string, as rand_augment_transform
    makes it (below)."""

    def __init__(self, config_str: str, fill: Any = (128, 128, 128), interpolation: Any = "random",
                 generator: GeneratorLike = None) -> None:
        self._kind = str(config_str)
        if not self._kind.startswith("rand"):
            raise ValueError(f"rand_augment_transform: {config_str!r} is not a timm RandAugment string (rand-...)")
        name = "rand_augment_transform"
        self.config_str = self._kind
        self.interpolation = "random" if interpolation == "random" else _policy_interpolation(interpolation, name)
        self.fill = fill
        self._fill = _policy_fill(fill, name)
        self.num_ops, self.magnitude, self.num_magnitude_bins = 2, 9, 31
        self.generator = _generator(generator)
        _tc.auto_augment_draw(self._kind, 1, 1, 0, 0, interpolation=self.interpolation)

    def draw_ops(self, width: int, height: int) -> list:
        seed, sequence = self.generator.draw()
        return _tc.auto_augment_draw(self._kind, width, height, seed, sequence, interpolation=self.interpolation)

    def apply_ops(self, image: np.ndarray, ops: Sequence[Tuple[str, float]]) -> np.ndarray:
        out = np.array(self._rgb(image), copy=True, order="C")
        _tc.auto_augment_apply(out, [(str(n), float(m)) for n, m in ops], "bilinear", self._fill)
        return out

    def _engine_args(self):
        args = super()._engine_args()
        args["policy_interpolation"] = self.interpolation
        return args

    def __repr__(self):
        return f"{type(self).__name__}({self.config_str!r}, fill={self.fill}, interpolation={self.interpolation})"


def rand_augment_transform(config_str: str, hparams: Optional[Dict[str, Any]] = None) -> TimmRandAugment:
    """timm.data.auto_augment.rand_augment_transform's drop-in: timm's
    RandAugment from its string ("rand-m9-mstd0.5-inc1": m, n, mstd, mmax,
    inc, p), on uint8 HWC arrays or fused after the crop. hparams as timm's:
    img_mean (the fill; timm's default grey 128 without it; timm's
    create_transform passes round(255 * mean), (124, 116, 104) for ImageNet)
    and interpolation ("bilinear" or "bicubic"; without it each geometric
    call picks one at random, timm's "random"). Weighted choices (w, t) are
    refused."""
    hparams = dict(hparams or {})
    unknown = set(hparams) - {"img_mean", "interpolation", "translate_const"}
    if unknown:
        raise ValueError(f"rand_augment_transform: hparams {sorted(unknown)} are not supported")
    interpolation = hparams.get("interpolation", "random")
    return TimmRandAugment(config_str, hparams.get("img_mean", (128, 128, 128)), interpolation)


class _Fused:
    """One engine call for a RandomResizedCrop (with the flip that follows
    it), or for a Resize with the CenterCrop that follows it."""

    def __init__(self, head, follower, policy=None, jitter=None, grayscale=None):
        self.head, self.follower = head, follower
        if isinstance(head, RandomResizedCrop):
            flip = follower.p if follower is not None else 0.0
            out_h, out_w = head.size
            extra = policy._engine_args() if policy is not None else {}
            if jitter is not None:
                extra["jitter"] = jitter._ranges()
            if grayscale is not None:
                extra["grayscale_probability"] = grayscale.p
            self.transform = _tc.ImageTransform(out_w, out_h, False, [0, 0, 0, 0], list(head.scale), list(head.ratio),
                                                flip, head.interpolation, MAX_PIXELS, **extra)
            self.generator = head.generator
        else:
            out_h, out_w = follower.size
            self.transform = _tc.ImageTransform(out_w, out_h, True, head.spec, [0.08, 1.0], [0.75, 4 / 3], 0.0,
                                                head.interpolation, MAX_PIXELS)
            self.generator = None

    def __call__(self, data):
        data = _check_encoded(data, type(self.head).__name__)
        if self.generator is not None:
            seed, sequence = self.generator.draw()
            return self.transform.augment(data, seed, sequence)
        try:
            return self.transform.augment(data, 0, 0)
        except ArgumentError:
            # A CenterCrop larger than the resized image: torchvision pads.
            return _center_crop_array(self.head(data), self.follower.size)


class Compose:
    """torchvision.transforms.Compose, fusing what it can: RandomResizedCrop
    followed by RandomHorizontalFlip, and Resize followed by CenterCrop,
    become one call on the encoded bytes. Any other callables (torchvision's
    ToTensor, Normalize, ...) run after, in order."""

    def __init__(self, transforms: Sequence[Callable[[Any], Any]]) -> None:
        self.transforms = [_from_torchvision_one(t) for t in transforms]
        self._steps = _fuse(self.transforms)

    def __call__(self, data: Any) -> Any:
        for step in self._steps:
            data = step(data)
        return data

    def __getstate__(self):
        return _without(self.__dict__, "_steps")

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._steps = _fuse(self.transforms)

    def __repr__(self):
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        return f"{type(self).__name__}([{inner}\n])"


def from_torchvision(transform: Any) -> Compose:
    """The same transform on encoded bytes: a torchvision Compose (or one
    transform) whose RandomResizedCrop, RandomHorizontalFlip, Resize,
    CenterCrop and PILToTensor become these, the rest kept as they are."""
    inner = getattr(transform, "transforms", None)
    return Compose(inner if isinstance(inner, (list, tuple)) else [transform])


def _from_torchvision_one(t):
    module = type(t).__module__ or ""
    if not module.startswith("torchvision.transforms"):
        return t
    name = type(t).__name__
    if name == "RandomResizedCrop":
        return RandomResizedCrop(tuple(t.size), t.scale, t.ratio, t.interpolation)
    if name == "RandomHorizontalFlip":
        return RandomHorizontalFlip(t.p)
    if name == "Resize":
        return Resize(t.size, t.interpolation, t.max_size)
    if name == "CenterCrop":
        return CenterCrop(tuple(t.size))
    if name == "PILToTensor":
        return PILToTensor()
    if name == "TrivialAugmentWide":
        return TrivialAugmentWide(t.num_magnitude_bins, t.interpolation, t.fill)
    if name == "RandAugment":
        return RandAugment(t.num_ops, t.magnitude, t.num_magnitude_bins, t.interpolation, t.fill)
    if name == "AutoAugment":
        return AutoAugment(t.policy, t.interpolation, t.fill)
    if name == "ColorJitter":
        return ColorJitter(*(r if r is not None else 0 for r in (t.brightness, t.contrast, t.saturation, t.hue)))
    if name == "RandomGrayscale":
        return RandomGrayscale(t.p)
    if name == "RandomErasing":
        return RandomErasing(t.p, t.scale, t.ratio, t.value, t.inplace)
    return t


def _fuse(transforms):
    steps = []
    i = 0
    while i < len(transforms):
        t = transforms[i]
        following = transforms[i + 1] if i + 1 < len(transforms) else None
        if i == 0 and isinstance(t, RandomResizedCrop):
            flip = following if isinstance(following, RandomHorizontalFlip) else None
            i += 2 if flip is not None else 1
            # What follows in the servers' order joins the call: a policy,
            # ColorJitter, RandomGrayscale.
            joined = []
            for kind in (_Policy, ColorJitter, RandomGrayscale):
                taken = i < len(transforms) and isinstance(transforms[i], kind)
                joined.append(transforms[i] if taken else None)
                i += 1 if taken else 0
            steps.append(_Fused(t, flip, *joined))
            continue
        elif i == 0 and isinstance(t, Resize) and isinstance(following, CenterCrop):
            steps.append(_Fused(t, following))
            i += 2
            continue
        else:
            steps.append(t)
        i += 1
    return steps


def _without(state, name):
    """A copy of an object's __dict__ without the C++ object held under name."""
    return {key: value for key, value in state.items() if key != name}


def _width_height(img):
    if isinstance(img, np.ndarray) and img.ndim >= 2:
        return img.shape[1], img.shape[0]
    return image_size(img)


# The batch transforms build on the Generator above.
from .mixing import CutMix, Mixup, MixUp, MixUpOrCutMix, mix_targets, served_mixes  # noqa: E402
