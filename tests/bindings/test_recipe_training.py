"""The trainer's half of the recipes (examples/pytorch/recipe_training.py):
schedules against torch's schedulers and the sources' formulas, LAMB
against Adam, the EMA, the losses, the weight-decay groups, BlurPool; and
train.py training each preset on served photos, its loss falling."""

import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

from tensorcom import recipes, reference_flags  # noqa: E402
from test_torch import SHARDS_EXE, TRAIN  # noqa: E402

sys.path.insert(0, os.path.dirname(TRAIN))
import recipe_training  # noqa: E402


def settings(*argv):
    return reference_flags.parse(list(argv))


def torch_rates(optimizer, scheduler, epochs):
    rates = []
    for _ in range(epochs):
        rates.append(optimizer.param_groups[0]["lr"])
        scheduler.step()
    return rates


def sgd(lr):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_torchvision_schedules_are_torchs_schedulers_stepped_by_epoch():
    epochs = 40
    s = settings("--lr", "0.5", "--lr-scheduler", "cosineannealinglr", "--lr-warmup-epochs", "5",
                 "--lr-warmup-method", "linear", "--lr-min", "0.001")
    opt = sgd(0.5)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=5)
    main = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs - 5, eta_min=0.001)
    expected = torch_rates(opt, torch.optim.lr_scheduler.SequentialLR(opt, [warm, main], milestones=[5]), epochs)
    ours = [recipe_training.learning_rate(s, epochs, e, 7, 10) for e in range(epochs)]
    assert ours == pytest.approx(expected, rel=1e-9, abs=1e-12)

    s = settings("--lr-warmup-epochs", "3", "--lr-step-size", "4", "--lr-gamma", "0.5")  # constant warm-up, steplr
    opt = sgd(0.1)
    warm = torch.optim.lr_scheduler.ConstantLR(opt, factor=0.01, total_iters=3)
    main = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    expected = torch_rates(opt, torch.optim.lr_scheduler.SequentialLR(opt, [warm, main], milestones=[3]), 20)
    assert [recipe_training.learning_rate(s, 20, e, 0, 1) for e in range(20)] == pytest.approx(expected, rel=1e-9)

    s = settings("--lr-scheduler", "exponentiallr", "--lr-gamma", "0.9")
    opt = sgd(0.1)
    expected = torch_rates(opt, torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9), 12)
    assert [recipe_training.learning_rate(s, 12, e, 0, 1) for e in range(12)] == pytest.approx(expected, rel=1e-9)


def timm_cosine(t, lr, warmup_t, warmup_lr_init, t_initial, lr_min):
    """timm's CosineLRScheduler._get_lr, one cycle, warmup_prefix off (restated from its source)."""
    if t < warmup_t:
        return warmup_lr_init + t * (lr - warmup_lr_init) / warmup_t
    if t >= t_initial:
        return lr_min
    return lr_min + 0.5 * (lr - lr_min) * (1 + math.cos(math.pi * t / t_initial))


def test_timm_cosine_warms_up_over_the_start_of_the_curve():
    s = recipes.get("timm-rsb-a3").settings
    ours = [recipe_training.learning_rate(s, 100, e, 3, 10) for e in range(101)]
    assert ours == pytest.approx([timm_cosine(e, 8e-3, 5, 1e-5, 100, 0.0) for e in range(101)], rel=1e-12)
    assert ours[0] == 1e-5 and ours[5] < 8e-3  # the warm-up ends on the curve, not at its peak


def ffcv_step_rates(lr, epochs, peak, epoch, iters):
    """FFCV's train_loop: each step's rate interpolated between get_lr(epoch) and get_lr(epoch + 1)."""
    def get_lr(e):
        return np.interp([e], [0, peak, epochs], [1e-4 * lr, lr, 0])[0]
    return np.interp(np.arange(iters), [0, iters], [get_lr(epoch), get_lr(epoch + 1)])


def test_ffcv_cyclic_rate_moves_every_step():
    s = recipes.get("ffcv-rn50").settings
    for epoch in (0, 1, 2, 50, 87):
        ours = [recipe_training.learning_rate(s, 88, epoch, i, 25) for i in range(25)]
        assert ours == pytest.approx(ffcv_step_rates(1.7, 88, 2, epoch, 25), rel=1e-9, abs=1e-12)


def quadratic_params(seed, scale):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(5, 3, generator=g)), torch.nn.Parameter(torch.randn(3, generator=g))], \
        [scale * torch.randn(5, 3, generator=g), scale * torch.randn(3, generator=g)]


def run_steps(optimizer, params, grads, steps=5):
    for step in range(steps):
        for p, g in zip(params, grads):
            p.grad = g * (1 + 0.1 * step)
        optimizer.step()
    return [p.detach().clone() for p in params]


def test_lamb_without_weight_decay_is_adam_on_clipped_gradients():
    for scale in (0.01, 10.0):  # gradients under and over the global norm of 1
        params, grads = quadratic_params(1, scale)
        ours = run_steps(recipe_training.Lamb(params, lr=0.01, weight_decay=0.0), params, grads)
        params, grads = quadratic_params(1, scale)
        adam = torch.optim.Adam(params, lr=0.01, eps=1e-6)
        for step in range(5):
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g * (1 + 0.1 * step))
                                                         for g in grads]))
            for p, g in zip(params, grads):
                p.grad = g * (1 + 0.1 * step) / max(1.0, float(norm))
            adam.step()
        for a, b in zip(ours, params):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)


def test_lamb_scales_each_decayed_update_to_the_weights_norm():
    params, grads = quadratic_params(2, 0.5)
    before = [p.detach().clone() for p in params]
    run_steps(recipe_training.Lamb(params, lr=0.01, weight_decay=0.02), params, grads, steps=1)
    for p, b in zip(params, before):
        assert float((p - b).norm()) == pytest.approx(0.01 * float(b.norm()), rel=1e-5)


def test_weight_decay_groups_as_each_script_makes_them():
    model = torchvision.models.resnet18(num_classes=10)
    names = {id(p): n for n, p in model.named_parameters()}

    def exempt(s):
        groups = recipe_training.parameter_groups(model, s)
        return sorted(names[id(p)] for g in groups if g["weight_decay"] == 0 for p in g["params"])

    tv = exempt(settings("--norm-weight-decay", "0", "--weight-decay", "2e-5"))
    assert len(tv) == 40 and "layer2.0.downsample.1.weight" in tv and "fc.bias" not in tv
    timm = exempt(settings("--sched", "cosine", "--weight-decay", "0.02"))
    assert timm == sorted(tv + ["fc.bias"])
    ffcv = exempt(settings("--lr.lr", "1.7", "--training.weight_decay", "1e-4"))
    assert ffcv == [n for n in tv if "bn" in n] and "layer2.0.downsample.1.weight" not in ffcv  # FFCV: names with "bn"
    assert exempt(settings()) == []


def test_torchvision_ema_every_n_steps_adjusted_and_restarted_in_warmup():
    s = settings("--model-ema", "--model-ema-steps", "2", "--model-ema-decay", "0.99", "--lr-warmup-epochs", "1")
    model = torch.nn.Linear(2, 1, bias=False)
    ema = recipe_training.ModelEma(model, s, world=2, batch=4, epochs=40)
    alpha = min(1.0, 0.01 * 2 * 4 * 2 / 40)
    assert ema.decay == pytest.approx(1 - alpha)
    for epoch, step, weight in ((0, 0, 1.0), (0, 1, 2.0), (0, 2, 3.0), (1, 0, 4.0), (1, 1, 5.0), (1, 2, 6.0)):
        with torch.no_grad():
            model.weight.fill_(weight)
        ema.after_step(model, epoch, step)
    # warm-up epoch 0: copies (step 0: 1, step 2: 3); epoch 1: step 0 copies 4 (the restart), step 2 averages 6
    assert float(ema.model.weight[0, 0]) == pytest.approx(4 * (1 - alpha) + 6 * alpha)


def test_timm_ema_every_step():
    s = settings("--sched", "cosine", "--model-ema", "--model-ema-decay", "0.5")
    model = torch.nn.Linear(1, 1, bias=False)
    ema = recipe_training.ModelEma(model, s, world=1, batch=1, epochs=1)
    for step, weight in enumerate((2.0, 4.0, 8.0)):
        with torch.no_grad():
            model.weight.fill_(weight)
        ema.after_step(model, 0, step)
    assert float(ema.model.weight[0, 0]) == pytest.approx((2 * 0.5 + 4 * 0.5) * 0.5 + 8 * 0.5)


def test_losses_as_the_scripts_compute_them():
    logits = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    labels = torch.tensor([0, 3, 1, 4])
    ce = recipe_training.RecipeLoss(settings("--label-smoothing", "0.1"), 5)
    assert torch.allclose(ce(logits, labels), torch.nn.CrossEntropyLoss(label_smoothing=0.1)(logits, labels))
    bce = recipe_training.RecipeLoss(settings("--bce-loss", "--smoothing", "0.1"), 5)
    targets = torch.full((4, 5), 0.02).scatter_(1, labels.view(-1, 1), 0.92)  # timm's one-hot, smoothed
    assert torch.allclose(bce(logits, labels), torch.nn.functional.binary_cross_entropy_with_logits(logits, targets))
    thresh = recipe_training.RecipeLoss(settings("--bce-loss", "--bce-target-thresh", "0.2"), 5)
    soft = torch.tensor([[0.7, 0.3, 0, 0, 0]] * 4)
    binary = torch.tensor([[1.0, 1.0, 0, 0, 0]] * 4)
    assert torch.allclose(thresh(logits, soft), torch.nn.functional.binary_cross_entropy_with_logits(logits, binary))
    # soft targets carry their smoothing already: cross-entropy on them as given
    assert torch.allclose(ce(logits, soft), -(soft * logits.log_softmax(1)).sum(1).mean())


def test_blurpool_wraps_ffcvs_convolutions():
    model = recipe_training.add_blurpool(torchvision.models.resnet18(num_classes=10))
    wrapped = [n for n, m in model.named_modules() if isinstance(m, recipe_training.BlurPoolConv2d)]
    assert wrapped == ["layer2.0.conv1", "layer2.0.downsample.0", "layer3.0.conv1", "layer3.0.downsample.0",
                       "layer4.0.conv1", "layer4.0.downsample.0"]
    assert model(torch.zeros(2, 3, 64, 64)).shape == (2, 10)


# --- each preset trained on served photos ---------------------------------------------

TRAIN_BATCH = 8
EPOCH_STEPS = 4
EPOCHS = 3
CLASSES = 10


def texture_shards(directory, shards=4, samples=24):
    """Shards of two classes, smooth images (0) and grainy ones (1), of any
    colour, interleaved in every shard: the grain survives the recipes'
    augmentations, and the head's other classes are never the answer, so
    the loss falls within a few steps. Returns a brace pattern naming them."""
    from PIL import Image
    import io
    import tarfile
    rng = np.random.default_rng(5)
    paths = []
    for s in range(shards):
        path = os.path.join(directory, f"shard-{s}.tar")
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for i in range(samples):
                label = i % 2
                grain = 90 if label else 4
                pixels = np.clip(rng.normal(rng.integers(60, 196, 3), grain, (32, 32, 3)), 0, 255).astype(np.uint8)
                jpeg = io.BytesIO()
                Image.fromarray(pixels).save(jpeg, "JPEG", quality=95)
                for ext, data in (("jpg", jpeg.getvalue()), ("cls", str(label).encode())):
                    info = tarfile.TarInfo(f"s{s}_{i:03d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        paths.append(path)
    return "{" + ",".join(paths) + "}"


def preset_server(recipe, shards, url, log_path):
    """serve-imagenet-shards with the preset's training flags (its batch the test's)."""
    flags = recipe.server_args("train")
    flags[flags.index("--batch") + 1] = str(TRAIN_BATCH)
    if "--ra-reps" in flags:
        flags += ["--dataset-samples", "96", "--ra-round", "0"]
    log = open(log_path, "wb")
    proc = subprocess.Popen([SHARDS_EXE, "-u", shards, "--seed", "5", "-w", "1", "-r", "0", "--classes", str(CLASSES),
                             "--meta", *flags, url], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    return proc


# SGD's rates, for each source's global batch (8 GPUs), scaled linearly to
# ours (the sources take --lr as given); LAMB's as given: its steps are
# bounded per layer. Warm-ups, like the epochs, shortened to one epoch.
@pytest.mark.parametrize("name, scaled", [
    ("torchvision-resnet50-v2", ("--lr", 0.5 * TRAIN_BATCH / (8 * 128), "--lr-warmup-epochs", 1)),
    ("timm-rsb-a3", ("--warmup-epochs", 1)),
    ("ffcv-rn50", ("--lr.lr", 1.7 * TRAIN_BATCH / (8 * 512), "--lr.lr_peak_epoch", 1)),
])
def test_each_preset_trains_on_served_photos_and_its_loss_falls(tmp_path, ipc_dir, name, scaled):
    if not os.access(SHARDS_EXE, os.X_OK):
        pytest.skip(f"{SHARDS_EXE} is not built")
    recipe = recipes.get(name)
    url = f"ipc://{ipc_dir}/preset"
    proc = preset_server(recipe, texture_shards(str(tmp_path)), "zpush+" + url, tmp_path / "server.log")
    try:
        overrides = [f"{v:.6g}" if isinstance(v, float) else str(v) for v in scaled]
        cmd = [sys.executable, TRAIN, "--arch", "resnet18", "--device", "cpu", "--no-amp", "--classes", str(CLASSES),
               "--recipe", name, "--batch-size", str(TRAIN_BATCH), *overrides, "--epochs", str(EPOCHS),
               "--epoch-size", str(EPOCH_STEPS), "--report", "0", "--timeout", "60", "--data", f"tensorcom:zpull+{url}"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    finally:
        proc.kill()
        proc.wait()
    assert r.returncode == 0, r.stdout + r.stderr + (tmp_path / "server.log").read_text()
    assert f"train:   settings ({recipe.settings.script}'s flags): " in r.stdout, r.stdout
    losses = [float(v) for v in re.findall(r"^train: epoch \d/\d: loss ([\d.]+), lr ", r.stdout, re.M)]
    assert len(losses) == EPOCHS, r.stdout
    print(name, losses)
    assert losses[-1] < 0.8 * losses[0], r.stdout


def test_train_refuses_two_scripts_flags_and_what_the_servers_cannot_serve():
    for flags, message in (
            (("--mixup", "0.1", "--mixup-alpha", "0.2"), "--mixup is timm's, --mixup-alpha is torchvision's"),
            (("--aa", "rand-m9-mstd0.5"), "(timm's default, random, picks one a crop): give one"),
            (("--recipe", "timm-rsb-a3", "--label-smoothing", "0.1"), "--label-smoothing is torchvision's")):
        r = subprocess.run([sys.executable, TRAIN, "--device", "cpu", "--data", "synthetic", "--epochs", "1", *flags],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode == 2 and message in r.stderr, r.stderr


def test_train_checkpoints_the_ema_and_resumes_it(tmp_path):
    checkpoint = tmp_path / "model.pt"
    common = [sys.executable, TRAIN, "--arch", "resnet18", "--device", "cpu", "--no-amp", "--classes", "10",
              "--data", "synthetic", "--batch-size", "2", "--image-size", "32", "--steps", "2", "--report", "0",
              "--sched", "cosine", "--model-ema", "--model-ema-decay", "0.5", "--checkpoint", str(checkpoint)]
    r = subprocess.run(common + ["--epochs", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    state = torch.load(str(checkpoint))
    assert state["ema"]["updates"] == 2 and state["ema"]["model"].keys() == state["model"].keys()
    r = subprocess.run(common + ["--epochs", "2", "--resume"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "resumed from" in r.stdout, r.stdout + r.stderr
    assert torch.load(str(checkpoint))["ema"]["updates"] == 4
