"""The training flags of the recipes' own scripts, read as those scripts
read them: torchvision's references/classification/train.py, timm's
train.py and FFCV's train_imagenet.py (its config keys as --section.key
flags). A command line takes one script's flags; that script's defaults
fill what it leaves out. The settings then give the servers' flags: this
is the one place where a recipe's data flags become serve-imagenet-*
options (docs/recipes.md).

    import argparse
    from tensorcom import reference_flags
    parser = argparse.ArgumentParser()
    reference_flags.add_to(parser, run_length=True)
    settings = reference_flags.resolve(parser.parse_args(["--aa", "rand-m6-mstd0.5-inc1", "--mixup", "0.1"]))
    settings.script                      # 'timm'
    reference_flags.server_args(settings, "train")
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ._tensorcom import ArgumentError

__all__ = ["Settings", "add_to", "parse", "resolve", "server_args", "data_flags_given", "describe", "SCRIPTS"]

SCRIPTS = ("torchvision", "timm", "ffcv")
ANY = "any"  # a flag several scripts share, with the same meaning


@dataclass(frozen=True)
class Flag:
    names: Tuple[str, ...]
    dest: str
    kind: Any  # float, int, str, bool (a switch), "pair" (two floats) or "truth" (1/0/true/false)
    script: str  # one of SCRIPTS, or ANY
    help: str


def _flag(names, dest, kind, script, help_text):
    return Flag(tuple(names.split()), dest, kind, script, help_text)


# Each script's flags, under the names it gives them; flags of different
# scripts that mean one thing share a dest (the trainer reads the dest).
FLAGS: Tuple[Flag, ...] = (
    # optimiser
    _flag("--opt", "opt", str, ANY, "optimiser: sgd, sgd_nesterov, adamw, lamb or rmsprop"),
    _flag("--training.optimizer", "opt", str, "ffcv", "FFCV: the optimiser (sgd)"),
    _flag("--lr", "lr", float, ANY, "learning rate (torchvision: 0.1; timm: 0.1 x global batch / 256, "
                                    "its square root for lamb and adam-like)"),
    _flag("--lr.lr", "lr", float, "ffcv", "FFCV: the peak learning rate (0.5)"),
    _flag("--momentum", "momentum", float, ANY, "SGD's momentum (0.9)"),
    _flag("--training.momentum", "momentum", float, "ffcv", "FFCV: SGD's momentum (0.9)"),
    _flag("--wd --weight-decay", "weight_decay", float, ANY, "weight decay (torchvision 1e-4, timm 2e-5)"),
    _flag("--training.weight_decay", "weight_decay", float, "ffcv", "FFCV: weight decay (4e-5), none on BatchNorm"),
    _flag("--norm-weight-decay", "norm_weight_decay", float, "torchvision", "weight decay of normalisation layers"),
    _flag("--clip-grad-norm", "clip_grad", float, "torchvision", "gradients clipped to this global norm"),
    _flag("--clip-grad", "clip_grad", float, "timm", "gradients clipped to this global norm"),
    # schedule
    _flag("--lr-scheduler", "sched", str, "torchvision", "steplr, cosineannealinglr or exponentiallr (steplr)"),
    _flag("--sched", "sched", str, "timm", "cosine, step or none (cosine)"),
    _flag("--lr.lr_schedule_type", "sched", str, "ffcv", "FFCV: cyclic (triangular) or step (cyclic)"),
    _flag("--lr-warmup-epochs", "warmup_epochs", int, "torchvision", "warm-up epochs (0)"),
    _flag("--warmup-epochs", "warmup_epochs", int, "timm", "warm-up epochs (5)"),
    _flag("--lr-warmup-method", "warmup_method", str, "torchvision", "linear or constant (constant)"),
    _flag("--lr-warmup-decay", "warmup_decay", float, "torchvision", "the warm-up's first factor of --lr (0.01)"),
    _flag("--warmup-lr", "warmup_lr", float, "timm", "the warm-up's first learning rate (1e-5)"),
    _flag("--lr-step-size", "step_size", int, "torchvision", "steplr: epochs a step (30)"),
    _flag("--decay-epochs", "step_size", float, "timm", "step: epochs a step (90)"),
    _flag("--lr.step_length", "step_size", int, "ffcv", "FFCV step: epochs a step (30)"),
    _flag("--lr-gamma", "gamma", float, "torchvision", "steplr, exponentiallr: the factor (0.1)"),
    _flag("--decay-rate", "gamma", float, "timm", "step: the factor (0.1)"),
    _flag("--lr.step_ratio", "gamma", float, "ffcv", "FFCV step: the factor (0.1)"),
    _flag("--lr-min", "min_lr", float, "torchvision", "cosineannealinglr's floor (0)"),
    _flag("--min-lr", "min_lr", float, "timm", "cosine's floor (0)"),
    _flag("--lr.lr_peak_epoch", "lr_peak_epoch", float, "ffcv", "FFCV cyclic: the epoch of the peak (2)"),
    # loss
    _flag("--label-smoothing", "label_smoothing", float, "torchvision", "label smoothing (0)"),
    _flag("--smoothing", "label_smoothing", float, "timm", "label smoothing (0.1)"),
    _flag("--training.label_smoothing", "label_smoothing", float, "ffcv", "FFCV: label smoothing (0.1)"),
    _flag("--bce-loss", "bce_loss", bool, "timm", "binary cross-entropy on the (soft) targets"),
    _flag("--bce-target-thresh", "bce_target_thresh", float, "timm", "BCE targets above this become 1, others 0"),
    # model
    _flag("--model-ema", "model_ema", bool, ANY, "evaluate an exponential moving average of the weights too"),
    _flag("--model-ema-steps", "model_ema_steps", int, "torchvision", "steps between EMA updates (32)"),
    _flag("--model-ema-decay", "model_ema_decay", float, ANY, "EMA decay (torchvision 0.99998, adjusted to "
                                                              "batch, steps and epochs; timm 0.9998 a step)"),
    _flag("--training.use_blurpool", "blurpool", "truth", "ffcv", "FFCV: blur before strided convolutions (0)"),
    # data: these become server flags (server_args)
    _flag("--train-crop-size", "train_size", int, "torchvision", "training crop (224)"),
    _flag("--img-size", "train_size", int, "timm", "training crop, and validation's unless --val-crop-size"),
    _flag("--resolution.min_res", "min_res", int, "ffcv", "FFCV: training size up to start_ramp (160)"),
    _flag("--resolution.max_res", "max_res", int, "ffcv", "FFCV: training size from end_ramp (160)"),
    _flag("--resolution.start_ramp", "start_ramp", int, "ffcv", "FFCV: the epoch the size starts growing"),
    _flag("--resolution.end_ramp", "end_ramp", int, "ffcv", "FFCV: the epoch it reaches max_res"),
    _flag("--val-crop-size", "val_size", int, ANY, "validation crop (224; timm: --img-size)"),
    _flag("--validation.resolution", "val_size", int, "ffcv", "FFCV: validation size (224), centre 224/256"),
    _flag("--val-resize-size", "val_resize", int, "torchvision", "validation: shorter side resized to (256)"),
    _flag("--crop-pct", "crop_pct", float, "timm", "validation: shorter side resized to size / crop_pct (0.875)"),
    _flag("--validation.lr_tta", "test_time_flip", "truth", "ffcv", "FFCV: mean of image and mirror logits (1)"),
    _flag("--interpolation", "interpolation", str, ANY, "bilinear or bicubic (torchvision: bilinear, every "
                                                        "resize; timm: bicubic, validation's)"),
    _flag("--train-interpolation", "train_interpolation", str, "timm", "training crops' (timm's default, random, "
                                                                       "is not served: bilinear or bicubic)"),
    _flag("--auto-augment", "auto_augment", str, "torchvision", "ta_wide, ra or imagenet"),
    _flag("--aa", "aa", str, "timm", "timm's RandAugment string, e.g. rand-m9-mstd0.5-inc1"),
    _flag("--color-jitter", "color_jitter", float, "timm", "ColorJitter without --aa (0.4)"),
    _flag("--random-erase", "random_erase", float, "torchvision", "RandomErasing's probability (0)"),
    _flag("--reprob", "reprob", float, "timm", "timm's RandomErasing probability (0; not served)"),
    _flag("--mixup-alpha", "mixup_alpha", float, "torchvision", "MixUp's alpha (0: off)"),
    _flag("--mixup", "mixup_alpha", float, "timm", "MixUp's alpha (0: off)"),
    _flag("--cutmix-alpha", "cutmix_alpha", float, "torchvision", "CutMix's alpha (0: off)"),
    _flag("--cutmix", "cutmix_alpha", float, "timm", "CutMix's alpha (0: off)"),
    _flag("--cutmix-minmax", "cutmix_minmax", "pair", "timm", "CutMix box sides as shares: MIN MAX"),
    _flag("--mixup-prob", "mixup_prob", float, "timm", "share of batches mixed (1)"),
    _flag("--mixup-switch-prob", "mixup_switch_prob", float, "timm", "CutMix's share when both are on (0.5)"),
    _flag("--mixup-mode", "mixup_mode", str, "timm", "batch, pair or elem (batch)"),
    _flag("--ra-sampler", "ra_sampler", bool, "torchvision", "repeated augmentation (RASampler)"),
    _flag("--ra-reps", "ra_reps", int, "torchvision", "--ra-sampler's repeats (3)"),
    _flag("--aug-repeats", "ra_reps", int, "timm", "repeated augmentation's repeats (0: off)"),
)

# The run's length; train.py has its own --batch-size and --epochs.
RUN_LENGTH: Tuple[Flag, ...] = (
    _flag("-b --batch-size", "batch_size", int, ANY, "images a step on a rank"),
    _flag("--epochs", "epochs", int, ANY, "epochs"),
)
RUN_LENGTH_FFCV: Tuple[Flag, ...] = (
    _flag("--training.batch_size", "batch_size", int, "ffcv", "FFCV: images a step on a GPU (512)"),
    _flag("--training.epochs", "epochs", int, "ffcv", "FFCV: epochs (30)"),
)

DEFAULTS: Dict[str, Dict[str, Any]] = {
    "torchvision": dict(
        opt="sgd", lr=0.1, momentum=0.9, weight_decay=1e-4, sched="steplr", warmup_epochs=0,
        warmup_method="constant", warmup_decay=0.01, step_size=30, gamma=0.1, min_lr=0.0, label_smoothing=0.0,
        model_ema=False, model_ema_steps=32, model_ema_decay=0.99998, train_size=224, val_size=224,
        val_resize=256, interpolation="bilinear", random_erase=0.0, mixup_alpha=0.0, cutmix_alpha=0.0,
        ra_sampler=False, ra_reps=3),
    "timm": dict(
        opt="sgd", momentum=0.9, weight_decay=2e-5, sched="cosine", warmup_epochs=5, warmup_lr=1e-5,
        step_size=90, gamma=0.1, min_lr=0.0, label_smoothing=0.1, bce_loss=False, model_ema=False,
        model_ema_decay=0.9998, train_size=224, crop_pct=0.875, interpolation="bicubic",
        train_interpolation="random", color_jitter=0.4, reprob=0.0, mixup_alpha=0.0, cutmix_alpha=0.0,
        mixup_prob=1.0, mixup_switch_prob=0.5, mixup_mode="batch", ra_reps=0),
    "ffcv": dict(
        opt="sgd", lr=0.5, momentum=0.9, weight_decay=4e-5, sched="cyclic", lr_peak_epoch=2.0, step_size=30,
        gamma=0.1, label_smoothing=0.1, blurpool=False, min_res=160, max_res=160, start_ramp=0, end_ramp=0,
        val_size=224, test_time_flip=True, interpolation="bilinear", batch_size=512, epochs=30),
}
# Each script's learning-rate schedules (the names it takes).
SCHEDULES = {"torchvision": ("steplr", "cosineannealinglr", "exponentiallr"),
             "timm": ("cosine", "step", "none"), "ffcv": ("cyclic", "step")}
OPTIMISERS = ("sgd", "sgd_nesterov", "nesterov", "adamw", "lamb", "rmsprop")


class Settings(dict):
    """dest -> value, every dest of FLAGS present (None: off or unset), and
    `script`: whose flags they are. Attribute access reads the dict."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def script(self) -> str:
        return self["script"]


class _Noted(argparse.Action):
    """Stores the value and notes which script's flag gave it."""

    def __init__(self, option_strings, dest, script, kind, **kwargs):
        self.script, self.kind = script, kind
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if self.kind is bool:
            values = True
        elif self.kind == "truth":
            try:
                values = _truth(values, option_string)
            except ValueError as e:
                parser.error(str(e))
        given = getattr(namespace, "_reference_flags", None) or []
        given.append((option_string, self.script))
        namespace._reference_flags = given
        setattr(namespace, self.dest, values)


def _truth(text, flag):
    lowered = str(text).lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise ValueError(f"{flag} {text!r}: expected 1, 0, true or false")


def add_to(parser: argparse.ArgumentParser, run_length: bool = False) -> None:
    """Adds every script's flags to parser (defaults None: resolve() fills
    them); run_length adds --batch-size and --epochs too (FFCV's
    --training.batch_size and --training.epochs always)."""
    group = parser.add_argument_group("the recipes' own flags (torchvision, timm or FFCV: one script's)")
    for flag in FLAGS + RUN_LENGTH_FFCV + (RUN_LENGTH if run_length else ()):
        kwargs: Dict[str, Any] = dict(dest=flag.dest, default=None, help=flag.help, script=flag.script,
                                      kind=flag.kind, action=_Noted)
        if flag.kind is bool:
            kwargs["nargs"] = 0
        elif flag.kind == "pair":
            kwargs.update(nargs=2, type=float, metavar=("MIN", "MAX"))
        elif flag.kind != "truth":
            kwargs["type"] = flag.kind
        group.add_argument(*flag.names, **kwargs)


def parse(argv: Sequence[str]) -> "Settings":
    """The settings of a command line of one script's flags (and
    --batch-size, --epochs); ArgumentError on a flag none of them takes."""
    parser = _Parser(add_help=False)
    add_to(parser, run_length=True)
    return resolve(parser.parse_args(list(argv)))


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ArgumentError(message)


def _dests() -> Iterable[str]:
    return {flag.dest for flag in FLAGS + RUN_LENGTH + RUN_LENGTH_FFCV}


def resolve(namespace: Any, preset: Optional["Settings"] = None) -> "Settings":
    """Settings from parsed flags: the script whose flags were given (one;
    ArgumentError naming a flag of each otherwise), then the preset's
    values (settings of the same script) where no flag was given, then the
    script's defaults. torchvision's when no script's own flag was given."""
    given = list(getattr(namespace, "_reference_flags", None) or [])
    scripts = {script for _, script in given if script != ANY}
    if preset is not None:
        scripts.add(preset.script)
    if len(scripts) > 1:
        raise ArgumentError(_mixed_scripts(given, preset))
    script = scripts.pop() if scripts else "torchvision"
    settings = Settings(script=script)
    for dest in _dests():
        value = getattr(namespace, dest, None)
        if value is None and preset is not None:
            value = preset.get(dest)
        if value is None:
            value = DEFAULTS[script].get(dest)
        settings[dest] = value
    _fill_derived(settings)
    _check(settings)
    return settings


def _mixed_scripts(given, preset):
    firsts: Dict[str, str] = {}
    for flag, script in given:
        if script != ANY:
            firsts.setdefault(script, flag)
    if preset is not None:
        firsts.setdefault(preset.script, f"the recipe's own ({preset.script})")
    shown = ", ".join(f"{flag} is {script}'s" for script, flag in firsts.items())
    return f"one script's flags at a time: {shown}"


def _fill_derived(s: "Settings") -> None:
    """What a script computes from other flags when a flag is not given."""
    if s.script == "timm":
        if s["lr"] is None:  # timm's --lr-base 0.1 at --lr-base-size 256, scaled by the batch
            ratio = (s["batch_size"] or 256) / 256
            adaptive = any(name in s["opt"] for name in ("ada", "lamb"))
            s["lr"] = 0.1 * (ratio ** 0.5 if adaptive else ratio)
        if s["val_size"] is None:
            s["val_size"] = s["train_size"]
    if s["model_ema"] is None:
        s["model_ema"] = False


def _check(s: "Settings") -> None:
    if s["opt"] not in OPTIMISERS:
        raise ArgumentError(f"--opt {s['opt']!r}: expected one of {', '.join(OPTIMISERS)}")
    if s["sched"] not in SCHEDULES[s.script]:
        raise ArgumentError(f"{s.script}'s schedule {s['sched']!r}: expected one of "
                            f"{', '.join(SCHEDULES[s.script])}")
    if s.script == "torchvision" and s["warmup_method"] not in ("linear", "constant"):
        raise ArgumentError(f"--lr-warmup-method {s['warmup_method']!r}: expected linear or constant")
    if s.script == "timm" and s["mixup_mode"] not in ("batch", "pair", "elem"):
        raise ArgumentError(f"--mixup-mode {s['mixup_mode']!r}: expected batch, pair or elem")
    if s["interpolation"] not in ("bilinear", "bicubic"):
        raise ArgumentError(f"--interpolation {s['interpolation']!r}: expected bilinear or bicubic")
    for name in ("lr", "momentum", "weight_decay", "label_smoothing", "mixup_alpha", "cutmix_alpha"):
        if s[name] is not None and s[name] < 0:
            raise ArgumentError(f"{name.replace('_', '-')} {s[name]}: must not be negative")


# --- the servers' flags -------------------------------------------------------------

# The dests server_args reads (batch_size aside: the trainer re-batches).
DATA_DESTS = frozenset((
    "train_size", "min_res", "max_res", "start_ramp", "end_ramp", "val_size", "val_resize", "crop_pct",
    "interpolation", "train_interpolation", "auto_augment", "aa", "color_jitter", "random_erase", "reprob",
    "mixup_alpha", "cutmix_alpha", "cutmix_minmax", "mixup_prob", "mixup_switch_prob", "mixup_mode",
    "ra_sampler", "ra_reps"))


def data_flags_given(namespace: Any) -> List[str]:
    """The flags given on the command line that set what the servers serve."""
    names = {name: flag.dest for flag in FLAGS for name in flag.names}
    given = getattr(namespace, "_reference_flags", None) or []
    return [flag for flag, _ in given if names.get(flag) in DATA_DESTS]


def server_args(settings: "Settings", split: str = "train") -> List[str]:
    """The serve-imagenet-shards/-dir flags that serve these settings' data
    for split ("train" or "val"); ArgumentError for what the servers cannot
    serve as the script does."""
    if split not in ("train", "val"):
        raise ArgumentError(f"split must be train or val, not {split!r}")
    s = settings
    if split == "val":
        return _val_args(s)
    args = ["--batch", str(s["batch_size"])] if s["batch_size"] else []
    args += _train_size_args(s)
    args += ["--interpolation", _train_interpolation(s)]
    args += _policy_args(s)
    if s.script == "torchvision" and s["random_erase"]:
        args += ["--random-erase", _number(s["random_erase"])]
    if s.script == "timm" and s["reprob"]:
        raise ArgumentError(f"--reprob {s['reprob']:g}: timm's RandomErasing is not served "
                            "(torchvision's is: --random-erase)")
    args += _mix_args(s)
    if s["ra_reps"] and (s.script == "timm" or s["ra_sampler"]) and s["ra_reps"] > 1:
        args += ["--ra-reps", str(s["ra_reps"])]
    if s.script == "torchvision" and s["random_erase"]:
        # RandomErasing works on the normalised image, before the batch is mixed.
        args += ["--dtype", "float16", "--layout", "BCHW"]
    return args


def _val_args(s: "Settings") -> List[str]:
    args = ["--val", "--size", str(s["val_size"])]
    if s.script == "torchvision":
        args += ["--val-resize", str(s["val_resize"])]
    elif s.script == "timm":
        args += ["--crop-pct", _number(s["crop_pct"])]
    return args + ["--interpolation", s["interpolation"]]


def _train_size_args(s: "Settings") -> List[str]:
    if s.script != "ffcv":
        return ["--size", str(s["train_size"])]
    if s["min_res"] == s["max_res"]:
        return ["--size", str(s["min_res"])]
    return ["--size-schedule", f"{s['min_res']},{s['max_res']},{s['start_ramp']},{s['end_ramp']}"]


def _train_interpolation(s: "Settings") -> str:
    if s.script != "timm":
        return s["interpolation"]
    if s["train_interpolation"] not in ("bilinear", "bicubic"):
        raise ArgumentError(f"--train-interpolation {s['train_interpolation']}: the servers' crops are "
                            "bilinear or bicubic (timm's default, random, picks one a crop): give one")
    return s["train_interpolation"]


def _policy_args(s: "Settings") -> List[str]:
    if s.script == "torchvision" and s["auto_augment"]:
        # The reference scripts pass their --interpolation to the policy.
        return ["--auto-augment", s["auto_augment"], "--policy-interpolation", s["interpolation"]]
    if s.script == "timm" and s["aa"]:
        return ["--aa", s["aa"]]
    if s.script == "timm" and s["color_jitter"]:
        return ["--color-jitter", _number(s["color_jitter"])]  # timm jitters colours only without --aa
    return []


def _mix_args(s: "Settings") -> List[str]:
    if not (s["mixup_alpha"] or s["cutmix_alpha"]):
        return []
    args = []
    for dest, flag in (("mixup_alpha", "--mixup-alpha"), ("cutmix_alpha", "--cutmix-alpha")):
        if s[dest]:
            args += [flag, _number(s[dest])]
    if s.script != "timm":
        return args + ["--mix-mode", "torchvision"]
    args += ["--mix-mode", s["mixup_mode"]]
    if s["mixup_prob"] != 1.0:
        args += ["--mix-prob", _number(s["mixup_prob"])]
    if s["mixup_switch_prob"] != 0.5:
        args += ["--mix-switch-prob", _number(s["mixup_switch_prob"])]
    if s["cutmix_minmax"]:
        args += ["--cutmix-minmax", ",".join(_number(v) for v in s["cutmix_minmax"])]
    return args


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# --- printing -----------------------------------------------------------------------

def describe(settings: "Settings", skip: Iterable[str] = ()) -> str:
    """The settings as their script's flags ("--opt lamb --lr 0.008 ..."),
    each dest once under the script's own name for it (FFCV's --lr.lr, not
    --lr), switches that are off and unset values left out."""
    flags = [f for f in FLAGS + RUN_LENGTH + RUN_LENGTH_FFCV if f.script in (ANY, settings.script)]
    own = {f.dest: f for f in flags if f.script != ANY}
    parts = []
    seen = set(skip)
    for flag in flags:
        flag = own.get(flag.dest, flag)
        value = settings.get(flag.dest)
        if flag.dest in seen or value is None or value is False:
            continue
        seen.add(flag.dest)
        name = flag.names[-1]
        if flag.kind is bool:
            parts.append(name)
        elif flag.kind == "truth":
            parts.append(f"{name} {int(value)}")
        elif flag.kind == "pair":
            parts.append(f"{name} {value[0]:g} {value[1]:g}")
        else:
            parts.append(f"{name} {_number(value)}")
    return " ".join(parts)
