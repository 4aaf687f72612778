"""Training recipes as their sources run them, and the server flags that
serve their data: the one place that maps a recipe to serve-imagenet-*
options (docs/recipes.md).

    from tensorcom import recipes
    r = recipes.get("torchvision-resnet50-v2")
    r.settings               # the trainer's settings, in torchvision's flag names
    r.server_args("train")   # ['--batch', '128', '--size', '176', ...]
    r.check(served)          # the servers' flags (their --meta "recipe"); ArgumentError where they differ
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Sequence

from . import reference_flags
from ._tensorcom import ArgumentError

__all__ = ["Recipe", "RECIPES", "get", "served_flags", "check_served"]


@dataclass(frozen=True)
class Recipe:
    """A recipe: where it comes from, its source's command line, and the
    flags that train.py takes for it, in its source script's own names
    (tensorcom.reference_flags): they give the trainer's settings and, by
    reference_flags.server_args, the servers' flags."""

    name: str
    source: str
    command: str
    flags: Sequence[str]
    model: str = "resnet50"

    @property
    def settings(self) -> reference_flags.Settings:
        return reference_flags.parse(self.flags)

    def server_args(self, split: str = "train") -> List[str]:
        """The serve-imagenet-shards flags for split ("train" or "val")."""
        return reference_flags.server_args(self.settings, split)

    def check(self, served: Mapping[str, str], split: str = "train") -> None:
        """Refuses (ArgumentError, naming each flag) servers whose flags, as
        their --meta "recipe" carries them, differ from this recipe's."""
        check_served(self.server_args(split), served, f"recipe {self.name}")


def check_served(wanted: Sequence[str], served: Mapping[str, str], what: str) -> None:
    """Refuses (ArgumentError, naming each flag) servers whose flags (their
    --meta "recipe", served_flags) differ from the wanted server flags.
    Their --batch is theirs: the trainer re-batches."""
    flags = _flags(wanted)
    flags.pop("batch", None)
    differ = []
    for flag, value in flags.items():
        have = served.get(flag)
        if have is None or not _same(value, have):
            shown = "not given" if have is None else f"--{flag} {have}".rstrip()
            differ.append(f"--{flag} {value}".rstrip() + f" here, {shown} there")
    if differ:
        raise ArgumentError(f"the servers do not serve {what}: " + "; ".join(differ))


def _flags(args: Sequence[str]) -> Dict[str, str]:
    """{flag: value} of "--flag value" pairs and bare "--flag" switches."""
    out: Dict[str, str] = {}
    i = 0
    while i < len(args):
        flag = args[i].lstrip("-")
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[flag] = args[i + 1]
            i += 2
        else:
            out[flag] = ""
            i += 1
    return out


def _same(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def served_flags(meta: Mapping[str, object]) -> Dict[str, str]:
    """The servers' augmentation flags from a batch's decoded --meta map
    ({} when they sent none)."""
    flat = meta.get("recipe") or []
    if not isinstance(flat, (list, tuple)) or len(flat) % 2 or not all(isinstance(v, str) for v in flat):
        raise ArgumentError("the batch metadata's recipe is not flag, value pairs")
    return dict(zip(flat[0::2], flat[1::2]))


TORCHVISION_V2 = ("torchrun --nproc_per_node=8 train.py --model resnet50 --batch-size 128 --lr 0.5 "
                  "--lr-scheduler cosineannealinglr --lr-warmup-epochs 5 --lr-warmup-method linear "
                  "--auto-augment ta_wide --epochs 600 --random-erase 0.1 --weight-decay 0.00002 "
                  "--norm-weight-decay 0.0 --label-smoothing 0.1 --mixup-alpha 0.2 --cutmix-alpha 1.0 "
                  "--train-crop-size 176 --model-ema --val-resize-size 232 --ra-sampler --ra-reps 4")
TIMM_A3 = ("train.py --model resnet50 --img-size 160 --epochs 100 --batch-size 256 --opt lamb --lr 8e-3 "
           "--weight-decay 0.02 --sched cosine --warmup-epochs 5 --aa rand-m6-mstd0.5-inc1 --mixup 0.1 "
           "--cutmix 1.0 --smoothing 0.0 --bce-loss --crop-pct 0.95")
FFCV_RN50 = ("train_imagenet.py --config-file rn50_configs/rn50_88_epochs.yaml: --training.batch_size 512 "
             "--training.epochs 88 --lr.lr 1.7 --lr.lr_schedule_type cyclic --training.label_smoothing 0.1 "
             "--training.momentum 0.9 --training.optimizer sgd --training.weight_decay 1e-4 "
             "--training.use_blurpool 1 --resolution.min_res 160 --resolution.max_res 192 "
             "--resolution.start_ramp 65 --resolution.end_ramp 76 --validation.resolution 256 "
             "--validation.lr_tta 1 (8 GPUs)")


def _source_flags(command: str) -> List[str]:
    """The training flags of a source's command line: what follows the
    script's name, less --model (train.py's --arch) and notes in brackets."""
    words = command.split(":", 1)[-1] if "--config-file" in command else command
    args = words.split()
    args = args[next(i for i, w in enumerate(args) if w.startswith("--") and not w.startswith("--nproc")):]
    args = [w for w in args if not w.startswith("(") and not w.endswith(")")]
    if "--model" in args:
        i = args.index("--model")
        del args[i:i + 2]
    return args


RECIPES: Dict[str, Recipe] = {r.name: r for r in (
    Recipe(
        name="torchvision-resnet50-v2",
        source="torchvision references/classification, the ResNet-50 IMAGENET1K_V2 weights' recipe "
               "(pytorch.org/blog/how-to-train-state-of-the-art-models-using-torchvision-latest-primitives)",
        command=TORCHVISION_V2, flags=tuple(_source_flags(TORCHVISION_V2))),
    Recipe(
        name="timm-rsb-a3",
        source="timm's ResNet strikes back, procedure A3 (arXiv:2110.00476, table 1; timm's resnet50.a3_in1k), "
               "evaluated at 224; its crops bicubic, where timm's default picks bilinear or bicubic a crop",
        command=TIMM_A3,
        flags=tuple(_source_flags(TIMM_A3)) + ("--val-crop-size", "224", "--train-interpolation", "bicubic")),
    Recipe(
        name="ffcv-rn50",
        source="FFCV's ImageNet example, rn50_configs/rn50_88_epochs.yaml (github.com/libffcv/ffcv-imagenet): "
               "its config keys as flags",
        command=FFCV_RN50, flags=tuple(_source_flags(FFCV_RN50))),
)}


def get(name: str) -> Recipe:
    """The recipe of that name; ArgumentError naming the known ones otherwise."""
    try:
        return RECIPES[name]
    except KeyError:
        raise ArgumentError(f"unknown recipe {name!r}: expected one of {', '.join(RECIPES)}") from None
