"""MixUp and CutMix batch transforms (re-exported by tensorcom.imaging).

torchvision's transforms.v2 MixUp, CutMix and the reference scripts'
RandomChoice of the two (MixUpOrCutMix), and timm's Mixup, on a collated
batch: images (N, C, H, W) as torch tensors or NumPy arrays, uint8, float32
or float16 (layout="NHWC" for channels-last batches, as the servers send),
and int labels (N,). Each returns the images mixed in place (a copy where
they cannot be written in place) and float32 soft targets (N, num_classes):

    mix = imaging.MixUpOrCutMix(mixup_alpha=0.2, cutmix_alpha=1.0, num_classes=1000)
    loader = DataLoader(dataset, batch_size=128, collate_fn=lambda b: mix(*default_collate(b)))

The draws come from a Generator, one (seed, sequence) a batch, as the
per-image transforms draw theirs; `last_mixes` holds the last batch's
draws, one (kind, partner, lambda, (x0, y0, x1, y1)) a sample. Given the
same draws the pixels and targets are torchvision's and timm's: float
batches bit for bit, uint8 batches rounded to nearest (ties to even) as
timm's collate rounds them.

mix_targets() makes the soft targets of a batch the servers mixed, from its
labels and the draws they sent.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import _tensorcom as _tc
from .generators import GeneratorLike, _generator

__all__ = ["MixUp", "CutMix", "MixUpOrCutMix", "Mixup", "mix_targets", "served_mixes"]

Mix = Tuple[str, int, float, Tuple[int, int, int, int]]

_LAYOUTS = ("NCHW", "NHWC")


_KINDS = ("none", "mixup", "cutmix")


def served_mixes(draws: Any) -> List[Mix]:
    """The draws a server sent (its float64 (N, 7) "mix" tensor: kind 0 none,
    1 MixUp, 2 CutMix; partner; lambda; x0, y0, x1, y1) as mix records."""
    rows = np.asarray(_to_numpy(draws), dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != 7:
        raise _tc.ArgumentError(f"a server's mix tensor has shape (N, 7), not {rows.shape}")
    if not np.isfinite(rows).all() or not np.isin(rows[:, 0], (0, 1, 2)).all():
        raise _tc.ArgumentError("a server's mix tensor holds a kind other than 0, 1 or 2, or a value not finite")
    box_and_partner = rows[:, [1, 3, 4, 5, 6]]
    if (box_and_partner != np.round(box_and_partner)).any() or (np.abs(box_and_partner) >= 2**31).any():
        raise _tc.ArgumentError("a server's mix tensor holds a partner or box that is no int32")
    return [(_KINDS[int(k)], int(p), float(lam), (int(x0), int(y0), int(x1), int(y1)))
            for k, p, lam, x0, y0, x1, y1 in rows]


def mix_targets(labels: Any, mixes: Any, num_classes: int, label_smoothing: float = 0.0) -> np.ndarray:
    """float32 (N, num_classes): each label's one-hot row (smoothed as timm's
    mixup_target) weighted lambda, plus its partner's weighted 1 - lambda.
    mixes: a transform's last_mixes, or the "mix" tensor a server sent."""
    if isinstance(mixes, np.ndarray) or hasattr(mixes, "numpy"):
        mixes = served_mixes(mixes)
    return _tc.batch_mix_targets(np.asarray(_to_numpy(labels), dtype=np.int64), list(mixes), int(num_classes),
                                 float(label_smoothing))


def _to_numpy(value):
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        if getattr(value, "is_cuda", False) or str(getattr(value, "device", "cpu")) != "cpu":
            raise _tc.ArgumentError("MixUp/CutMix mix CPU batches (in a DataLoader's collate); "
                                    f"this tensor is on {value.device}")
        return value.detach().numpy()
    return np.asarray(value)


def _writable_view(images):
    """(array to mix in place, result to return): the images' own memory
    when it can be written in place, else a C-contiguous copy."""
    array = _to_numpy(images)
    if array.ndim != 4:
        raise _tc.ArgumentError(f"MixUp/CutMix need a batch of images (N, C, H, W), not shape {array.shape}")
    if array.flags.c_contiguous and array.flags.writeable:
        return array, images
    copy = np.ascontiguousarray(array).copy()
    if hasattr(images, "detach"):
        import torch

        return copy, torch.from_numpy(copy)
    return copy, copy


class _BatchMix:
    """Draws, mixes and makes targets; subclasses set the options."""

    def __init__(self, *, mode: str, mixup_alpha: float, cutmix_alpha: float, num_classes: int,
                 cutmix_minmax: Optional[Sequence[float]] = None, prob: float = 1.0, switch_prob: float = 0.5,
                 correct_lam: bool = True, label_smoothing: float = 0.0, layout: str = "NCHW",
                 generator: GeneratorLike = None) -> None:
        if not isinstance(num_classes, (int, np.integer)) or isinstance(num_classes, bool) or num_classes <= 0:
            raise _tc.ArgumentError(f"num_classes must be a positive int, not {num_classes!r}")
        if layout not in _LAYOUTS:
            raise _tc.ArgumentError(f"layout must be NCHW or NHWC, not {layout!r}")
        if cutmix_minmax is not None:
            cutmix_minmax = tuple(float(v) for v in cutmix_minmax)
            if len(cutmix_minmax) != 2:
                raise _tc.ArgumentError(f"cutmix_minmax must be (min, max), not {cutmix_minmax!r}")
        self._options = dict(mode=mode, mixup_alpha=float(mixup_alpha), cutmix_alpha=float(cutmix_alpha),
                             cutmix_minmax=cutmix_minmax, prob=float(prob), switch_prob=float(switch_prob),
                             correct_lam=bool(correct_lam))
        # Refuses bad options now, not at the first batch.
        _tc.batch_mix_draw(count=0, height=1, width=1, seed=0, sequence=0, **self._options)
        self.num_classes = int(num_classes)
        self.label_smoothing = float(label_smoothing)
        self.layout = layout
        self.generator = _generator(generator)
        self.last_mixes: List[Mix] = []

    def draw(self, count: int, height: int, width: int) -> List[Mix]:
        """The next batch's draws for count images of height x width."""
        seed, sequence = self.generator.draw()
        return _tc.batch_mix_draw(count=count, height=height, width=width, seed=seed, sequence=sequence,
                                  **self._options)

    def _mix(self, images, labels):
        array, result = _writable_view(images)
        channels_last = self.layout == "NHWC"
        height, width = array.shape[1:3] if channels_last else array.shape[2:4]
        label_array = np.asarray(_to_numpy(labels))
        if label_array.shape != (array.shape[0],):
            raise _tc.ArgumentError(f"labels must have shape ({array.shape[0]},), not {label_array.shape}")
        mixes = self.draw(array.shape[0], height, width)
        _tc.batch_mix_apply(array, mixes, channels_last)
        targets = mix_targets(label_array, mixes, self.num_classes, self.label_smoothing)
        self.last_mixes = mixes
        if hasattr(images, "detach"):
            import torch

            targets = torch.from_numpy(targets)
        return result, targets

    def __call__(self, images: Any, labels: Any) -> Tuple[Any, Any]:
        return self._mix(images, labels)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self._options.items() if k != "mode")
        return f"{type(self).__name__}({shown}, num_classes={self.num_classes})"


class MixUp(_BatchMix):
    """torchvision.transforms.v2.MixUp(alpha, num_classes): one lambda from
    Beta(alpha, alpha) a batch, each image mixed with the one before it."""

    def __init__(self, *, alpha: float = 1.0, num_classes: int, layout: str = "NCHW",
                 generator: GeneratorLike = None) -> None:
        super().__init__(mode="torchvision", mixup_alpha=alpha, cutmix_alpha=0.0, num_classes=num_classes,
                         layout=layout, generator=generator)


class CutMix(_BatchMix):
    """torchvision.transforms.v2.CutMix(alpha, num_classes): the box of the
    image before each pasted into it; lambda the share of area left."""

    def __init__(self, *, alpha: float = 1.0, num_classes: int, layout: str = "NCHW",
                 generator: GeneratorLike = None) -> None:
        super().__init__(mode="torchvision", mixup_alpha=0.0, cutmix_alpha=alpha, num_classes=num_classes,
                         layout=layout, generator=generator)


class MixUpOrCutMix(_BatchMix):
    """torchvision's reference scripts' v2.RandomChoice([MixUp(mixup_alpha),
    CutMix(cutmix_alpha)]): one of the two, evenly, a batch."""

    def __init__(self, *, mixup_alpha: float = 0.2, cutmix_alpha: float = 1.0, num_classes: int,
                 layout: str = "NCHW", generator: GeneratorLike = None) -> None:
        super().__init__(mode="torchvision", mixup_alpha=mixup_alpha, cutmix_alpha=cutmix_alpha,
                         num_classes=num_classes, layout=layout, generator=generator)


class Mixup(_BatchMix):
    """timm.data.Mixup, with its arguments: mode 'batch', 'pair' or 'elem'
    (partners mirrored: sample i with N - 1 - i), prob, switch_prob,
    cutmix_minmax, correct_lam, and label_smoothing folded into the targets.
    Called as timm's: mixup(x, target) -> (x, soft targets)."""

    def __init__(self, mixup_alpha: float = 1.0, cutmix_alpha: float = 0.0,
                 cutmix_minmax: Optional[Sequence[float]] = None, prob: float = 1.0, switch_prob: float = 0.5,
                 mode: str = "batch", correct_lam: bool = True, label_smoothing: float = 0.1,
                 num_classes: int = 1000, layout: str = "NCHW", generator: GeneratorLike = None) -> None:
        if mode not in ("batch", "pair", "elem"):
            raise _tc.ArgumentError(f"mode must be batch, pair or elem, not {mode!r}")
        super().__init__(mode=mode, mixup_alpha=mixup_alpha, cutmix_alpha=cutmix_alpha, num_classes=num_classes,
                         cutmix_minmax=cutmix_minmax, prob=prob, switch_prob=switch_prob, correct_lam=correct_lam,
                         label_smoothing=label_smoothing, layout=layout, generator=generator)
