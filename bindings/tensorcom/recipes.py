"""Training recipes as their sources run them, and the server flags that
serve their data: the one place that maps a recipe to serve-imagenet-*
options (docs/recipes.md).

    from tensorcom import recipes
    r = recipes.get("torchvision-resnet50-v2")
    r.server_args("train")   # ['--size', '176', '--auto-augment', 'ta_wide', ...]
    r.check(served)          # the servers' flags (their --meta "recipe"); ArgumentError where they differ
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Sequence

from ._tensorcom import ArgumentError

__all__ = ["Recipe", "RECIPES", "get", "served_flags"]


@dataclass(frozen=True)
class Recipe:
    """A recipe: where it comes from, its source's command line, the flags
    of its training and validation servers, and the trainer's settings that
    train.py takes (the rest of the source's, such as its optimiser and
    schedule, are the trainer's own)."""

    name: str
    source: str
    command: str
    train: Sequence[str]
    val: Sequence[str]
    trainer: Mapping[str, object] = field(default_factory=dict)

    def server_args(self, split: str = "train") -> List[str]:
        """The serve-imagenet-shards flags for split ("train" or "val")."""
        if split not in ("train", "val"):
            raise ArgumentError(f"split must be train or val, not {split!r}")
        return list(self.train if split == "train" else self.val)

    def check(self, served: Mapping[str, str], split: str = "train") -> None:
        """Refuses (ArgumentError, naming each flag) servers whose flags, as
        their --meta "recipe" carries them, differ from this recipe's."""
        wanted = _flags(self.server_args(split))
        differ = []
        for flag, value in wanted.items():
            have = served.get(flag)
            if have is None or not _same(value, have):
                shown = "not given" if have is None else f"--{flag} {have}".rstrip()
                differ.append(f"--{flag} {value}".rstrip() + f" here, {shown} there")
        if differ:
            raise ArgumentError(f"the servers do not serve recipe {self.name}: " + "; ".join(differ))


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


# Each recipe's training servers send float16 CHW normalised images: its
# RandomErasing works on the normalised image, before the batch is mixed.
RECIPES: Dict[str, Recipe] = {r.name: r for r in (
    Recipe(
        name="torchvision-resnet50-v2",
        source="torchvision references/classification, the ResNet-50 IMAGENET1K_V2 weights' recipe "
               "(pytorch.org/blog/how-to-train-state-of-the-art-models-using-torchvision-latest-primitives)",
        command="torchrun --nproc_per_node=8 train.py --model resnet50 --batch-size 128 --lr 0.5 "
                "--lr-scheduler cosineannealinglr --lr-warmup-epochs 5 --lr-warmup-method linear "
                "--auto-augment ta_wide --epochs 600 --random-erase 0.1 --weight-decay 0.00002 "
                "--norm-weight-decay 0.0 --label-smoothing 0.1 --mixup-alpha 0.2 --cutmix-alpha 1.0 "
                "--train-crop-size 176 --model-ema --val-resize-size 232 --ra-sampler --ra-reps 4",
        train=("--batch", "128", "--size", "176", "--interpolation", "bilinear", "--auto-augment", "ta_wide",
               "--policy-interpolation", "bilinear", "--random-erase", "0.1", "--mixup-alpha", "0.2",
               "--cutmix-alpha", "1.0", "--mix-mode", "torchvision", "--ra-reps", "4", "--dtype", "float16",
               "--layout", "BCHW"),
        val=("--val", "--size", "224", "--val-resize", "232", "--interpolation", "bilinear"),
        trainer={"label_smoothing": 0.1, "lr": 0.5, "epochs": 600, "batch_size": 128}),
    Recipe(
        name="timm-rsb-a3",
        source="timm's ResNet strikes back, procedure A3 (arXiv:2110.00476, table 1; timm's resnet50.a3_in1k)",
        command="train.py --model resnet50 --img-size 160 --epochs 100 --batch-size 256 --opt lamb --lr 8e-3 "
                "--weight-decay 0.02 --sched cosine --warmup-epochs 5 --aa rand-m6-mstd0.5-inc1 --mixup 0.1 "
                "--cutmix 1.0 --smoothing 0.0 --bce-loss --crop-pct 0.95 (eval at 224)",
        train=("--batch", "256", "--size", "160", "--interpolation", "bicubic", "--aa", "rand-m6-mstd0.5-inc1",
               "--mixup-alpha", "0.1", "--cutmix-alpha", "1.0", "--mix-mode", "batch"),
        val=("--val", "--size", "224", "--crop-pct", "0.95", "--interpolation", "bicubic"),
        trainer={"label_smoothing": 0.0, "lr": 8e-3, "epochs": 100, "batch_size": 256}),
    Recipe(
        name="ffcv-rn50",
        source="FFCV's ImageNet example, rn50_configs/rn50_88_epochs.yaml (github.com/libffcv/ffcv-imagenet)",
        command="train_imagenet.py --config-file rn50_configs/rn50_88_epochs.yaml: batch_size 512, world_size 8, "
                "lr 1.7 (cyclic), sgd momentum 0.9, weight_decay 1e-4 (bn_wd 0), label_smoothing 0.1, blurpool, "
                "resolution 160 to 192 over epochs 65 to 76, validation resolution 256 with lr_tta",
        train=("--batch", "512", "--size-schedule", "160,192,65,76", "--interpolation", "bilinear"),
        val=("--val", "--size", "256", "--interpolation", "bilinear"),
        trainer={"label_smoothing": 0.1, "lr": 1.7, "epochs": 88, "batch_size": 512, "test_time_flip": True}),
)}


def get(name: str) -> Recipe:
    """The recipe of that name; ArgumentError naming the known ones otherwise."""
    try:
        return RECIPES[name]
    except KeyError:
        raise ArgumentError(f"unknown recipe {name!r}: expected one of {', '.join(RECIPES)}") from None
