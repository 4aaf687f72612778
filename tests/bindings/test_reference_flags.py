"""tensorcom.reference_flags and tensorcom.recipes: the recipes' own
scripts' flags read with those scripts' defaults, one script at a time, and
mapped to the servers' flags. No torch needed."""

import argparse

import pytest

from tensorcom import ArgumentError, recipes, reference_flags


def parse(*argv):
    return reference_flags.parse(list(argv))


def test_each_scripts_defaults_fill_what_is_not_given():
    tv = parse()
    assert tv.script == "torchvision"
    assert (tv.opt, tv.lr, tv.weight_decay, tv.sched, tv.step_size, tv.gamma) == ("sgd", 0.1, 1e-4, "steplr", 30, 0.1)
    assert (tv.model_ema_decay, tv.model_ema_steps, tv.val_resize, tv.val_size) == (0.99998, 32, 256, 224)
    timm = parse("--aa", "rand-m9-mstd0.5-inc1")
    assert timm.script == "timm"
    assert (timm.sched, timm.warmup_epochs, timm.warmup_lr, timm.weight_decay, timm.label_smoothing) == (
        "cosine", 5, 1e-5, 2e-5, 0.1)
    assert (timm.model_ema_decay, timm.crop_pct, timm.mixup_mode, timm.mixup_switch_prob) == (0.9998, 0.875, "batch",
                                                                                              0.5)
    ffcv = parse("--lr.lr", "1.7")
    assert (ffcv.script, ffcv.sched, ffcv.lr_peak_epoch, ffcv.weight_decay, ffcv.test_time_flip) == (
        "ffcv", "cyclic", 2.0, 4e-5, True)


def test_timm_scales_its_default_learning_rate_by_the_batch():
    """timm's --lr-base 0.1 at 256 images: linear for SGD, square root for LAMB and Adam-like."""
    assert parse("--sched", "cosine", "--batch-size", "512").lr == pytest.approx(0.2)
    assert parse("--sched", "cosine", "--batch-size", "1024", "--opt", "lamb").lr == pytest.approx(0.2)
    assert parse("--sched", "cosine", "--lr", "0.03", "--batch-size", "1024").lr == 0.03
    assert parse("--img-size", "160").val_size == 160  # timm validates at its --img-size


def test_one_scripts_flags_at_a_time():
    with pytest.raises(ArgumentError, match="--mixup is timm's, --mixup-alpha is torchvision's"):
        parse("--mixup", "0.2", "--mixup-alpha", "0.2")
    with pytest.raises(ArgumentError, match="--lr.lr is ffcv's, --sched is timm's"):
        parse("--lr.lr", "1", "--sched", "cosine")
    shared = parse("--lr", "0.3", "--opt", "adamw", "--model-ema")  # flags both scripts have
    assert (shared.script, shared.lr, shared.opt, shared.model_ema) == ("torchvision", 0.3, "adamw", True)


def test_bad_values_are_refused_by_name():
    for argv, message in (
            (("--opt", "adagrad"), "--opt 'adagrad': expected one of"),
            (("--lr-scheduler", "cosine"), "torchvision's schedule 'cosine': expected one of steplr"),
            (("--sched", "steplr"), "timm's schedule 'steplr': expected one of cosine"),
            (("--mixup-mode", "row"), "--mixup-mode 'row': expected batch, pair or elem"),
            (("--interpolation", "lanczos"), "--interpolation 'lanczos': expected bilinear or bicubic"),
            (("--lr-warmup-method", "cosine"), "--lr-warmup-method 'cosine': expected linear or constant"),
            (("--lr", "-1"), "lr -1.0: must not be negative"),
            (("--validation.lr_tta", "maybe"), "expected 1, 0, true or false"),
            (("--no-such-flag",), "unrecognized arguments: --no-such-flag")):
        with pytest.raises(ArgumentError, match=message):
            parse(*argv)


def test_the_preset_fills_only_what_the_command_line_leaves():
    parser = argparse.ArgumentParser()
    reference_flags.add_to(parser, run_length=True)
    preset = recipes.get("torchvision-resnet50-v2").settings
    settings = reference_flags.resolve(parser.parse_args(["--lr", "0.2", "--mixup-alpha", "0.8"]), preset)
    assert (settings.lr, settings.mixup_alpha, settings.cutmix_alpha, settings.sched) == (
        0.2, 0.8, 1.0, "cosineannealinglr")
    with pytest.raises(ArgumentError, match="--smoothing is timm's, the recipe's own \\(torchvision\\)"):
        reference_flags.resolve(parser.parse_args(["--smoothing", "0.2"]), preset)


def source_flags(command):
    """{flag: value} of a source's command line (switches: True), its --model left out."""
    words = [w for w in command.split() if not w.startswith("(") and not w.endswith(")")]
    words = words[next(i for i, w in enumerate(words) if w.startswith("--") and not w.startswith("--nproc")):]
    out, i = {}, 0
    while i < len(words):
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[words[i]] = words[i + 1]
            i += 2
        else:
            out[words[i]] = True
            i += 1
    out.pop("--model", None)
    out.pop("--config-file", None)
    return out


@pytest.mark.parametrize("name", sorted(recipes.RECIPES))
def test_each_presets_settings_are_its_sources_command_line(name):
    """Every flag of the source's command line, read back from the printed
    settings (describe) of the preset, has the source's value."""
    recipe = recipes.get(name)
    printed = recipe.settings
    again = reference_flags.parse(reference_flags.describe(printed).split())
    assert again == printed
    source = source_flags(recipe.command.split(":", 1)[-1] if "--config-file" in recipe.command else recipe.command)
    assert len(source) >= 12, source
    from_source = reference_flags.parse([w for flag, value in source.items()
                                         for w in ((flag,) if value is True else (flag, value))])
    for flag in source:
        dest = next(f.dest for f in reference_flags.FLAGS + reference_flags.RUN_LENGTH
                    + reference_flags.RUN_LENGTH_FFCV if flag in f.names)
        assert printed[dest] == from_source[dest], (flag, printed[dest], from_source[dest])


def test_presets_map_to_their_servers_flags():
    tv = recipes.get("torchvision-resnet50-v2")
    assert tv.server_args("train") == [
        "--batch", "128", "--size", "176", "--interpolation", "bilinear", "--auto-augment", "ta_wide",
        "--policy-interpolation", "bilinear", "--random-erase", "0.1", "--mixup-alpha", "0.2", "--cutmix-alpha", "1",
        "--mix-mode", "torchvision", "--ra-reps", "4", "--dtype", "float16", "--layout", "BCHW"]
    assert tv.server_args("val") == ["--val", "--size", "224", "--val-resize", "232", "--interpolation", "bilinear"]
    a3 = recipes.get("timm-rsb-a3")
    assert a3.server_args("train") == ["--batch", "256", "--size", "160", "--interpolation", "bicubic", "--aa",
                                       "rand-m6-mstd0.5-inc1", "--mixup-alpha", "0.1", "--cutmix-alpha", "1",
                                       "--mix-mode", "batch"]
    assert a3.server_args("val") == ["--val", "--size", "224", "--crop-pct", "0.95", "--interpolation", "bicubic"]
    ffcv = recipes.get("ffcv-rn50")
    assert ffcv.server_args("train") == ["--batch", "512", "--size-schedule", "160,192,65,76", "--interpolation",
                                         "bilinear"]
    assert ffcv.server_args("val") == ["--val", "--size", "256", "--interpolation", "bilinear"]


def test_timm_data_flags_map_as_timm_applies_them():
    train = reference_flags.server_args(parse(
        "--img-size", "192", "--train-interpolation", "bilinear", "--mixup", "0.8", "--cutmix", "1.0",
        "--mixup-mode", "elem", "--mixup-prob", "0.5", "--mixup-switch-prob", "0.3", "--cutmix-minmax", "0.2", "0.8",
        "--aug-repeats", "3"), "train")
    # no --aa: timm jitters colours (its default 0.4)
    assert train == ["--size", "192", "--interpolation", "bilinear", "--color-jitter", "0.4", "--mixup-alpha", "0.8",
                     "--cutmix-alpha", "1", "--mix-mode", "elem", "--mix-prob", "0.5", "--mix-switch-prob", "0.3",
                     "--cutmix-minmax", "0.2,0.8", "--ra-reps", "3"]
    with pytest.raises(ArgumentError, match="timm's default, random, picks one a crop"):
        reference_flags.server_args(parse("--aa", "rand-m9"), "train")
    with pytest.raises(ArgumentError, match="--reprob 0.25: timm's RandomErasing is not served"):
        reference_flags.server_args(parse("--reprob", "0.25", "--train-interpolation", "bicubic"), "train")
    with pytest.raises(ArgumentError, match="split must be train or val"):
        reference_flags.server_args(parse(), "test")


def test_torchvision_repeats_only_with_its_sampler():
    assert "--ra-reps" not in reference_flags.server_args(parse("--ra-reps", "4"), "train")
    assert reference_flags.server_args(parse("--ra-sampler"), "train")[-2:] == ["--ra-reps", "3"]


def test_data_flags_given_are_named():
    parser = argparse.ArgumentParser()
    reference_flags.add_to(parser)
    args = parser.parse_args(["--lr", "0.1", "--auto-augment", "ta_wide", "--train-crop-size", "176"])
    assert reference_flags.data_flags_given(args) == ["--auto-augment", "--train-crop-size"]


def test_servers_that_serve_otherwise_are_refused_by_flag():
    wanted = recipes.get("timm-rsb-a3").server_args("train")
    served = dict(zip(wanted[0::2], wanted[1::2]))
    served = {k.lstrip("-"): v for k, v in served.items()}
    served["batch"] = "32"  # the servers' batches are theirs: the trainer re-batches
    recipes.check_served(wanted, served, "recipe x")
    served["mixup-alpha"] = "0.2"
    del served["aa"]
    with pytest.raises(ArgumentError, match="do not serve recipe x: --aa rand-m6-mstd0.5-inc1 here, not given "
                                            "there; --mixup-alpha 0.1 here, --mixup-alpha 0.2 there"):
        recipes.check_served(wanted, served, "recipe x")
