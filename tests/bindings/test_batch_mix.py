"""MixUp/CutMix batch transforms against torchvision's transforms.v2 and
timm's Mixup/FastCollateMixup, for the draws ours recorded (neither can be
asked for a given lambda or box, so their arithmetic is restated here from
their source, step for step); the lambdas' distribution; refusals.
"""

import numpy as np
import pytest

from statistics_tests import ks_2samp
from tensorcom import imaging
from tensorcom import _tensorcom as C

torch = pytest.importorskip("torch")
one_hot = torch.nn.functional.one_hot

NUM_CLASSES = 10


def batch(n=6, c=3, h=20, w=24, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.uint8:
        return torch.randint(0, 256, (n, c, h, w), generator=g, dtype=torch.uint8)
    return (torch.rand((n, c, h, w), generator=g) * 4 - 2).to(dtype)


def labels(n=6):
    return torch.arange(n) * 3 % NUM_CLASSES


# --- torchvision v2 (_augment.py: MixUp, CutMix, _mixup_label) -------------

def torchvision_mix(x, y, mix):
    kind, _, lam, (x1, y1, x2, y2) = mix
    if kind == "mixup":
        out = x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam))
    else:
        out = x.clone()
        out[..., y1:y2, x1:x2] = x.roll(1, 0)[..., y1:y2, x1:x2]
    label = one_hot(y, num_classes=NUM_CLASSES).float()
    return out, label.roll(1, 0).mul_(1.0 - lam).add_(label.mul(lam))


# --- timm (mixup.py: Mixup._mix_batch/_mix_pair/_mix_elem, mixup_target) --

def timm_target(target, lam, smoothing):
    off_value = smoothing / NUM_CLASSES
    on_value = 1. - smoothing + off_value

    def hot(t):
        return torch.full((t.size(0), NUM_CLASSES), off_value).scatter_(1, t.long().view(-1, 1), on_value)

    return hot(target) * lam + hot(target.flip(0)) * (1. - lam)


def timm_mix(x, target, mixes, mode, smoothing):
    n = len(x)
    if mode == "batch":
        kind, _, lam, (xl, yl, xh, yh) = mixes[0]
        if kind == "cutmix":
            x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]
        elif kind == "mixup":
            x_flipped = x.flip(0).mul_(1. - lam)
            x.mul_(lam).add_(x_flipped)
        return x, timm_target(target, lam, smoothing)
    lam_batch = np.array([m[2] for m in mixes], dtype=np.float32)
    x_orig = x.clone()
    for i in range(n if mode == "elem" else n // 2):
        j = n - i - 1
        kind, _, _, (xl, yl, xh, yh) = mixes[i]
        lam = lam_batch[i]
        if kind == "cutmix":
            x[i][:, yl:yh, xl:xh] = x_orig[j][:, yl:yh, xl:xh]
            if mode == "pair":
                x[j][:, yl:yh, xl:xh] = x_orig[i][:, yl:yh, xl:xh]
        elif kind == "mixup":
            x[i] = x[i] * lam + x_orig[j] * (1 - lam)
            if mode == "pair":
                x[j] = x[j] * lam + x_orig[i] * (1 - lam)
    return x, timm_target(target, torch.tensor(lam_batch, dtype=x.dtype).unsqueeze(1), smoothing)


def timm_blend(a, b, lam):
    """FastCollateMixup's uint8 blend (numpy, rounded to nearest even)."""
    blend = a.astype(np.float32) * lam + b.astype(np.float32) * (1 - lam)
    np.rint(blend, out=blend)
    return blend.astype(np.uint8)


# --- tests ------------------------------------------------------------------

@pytest.mark.parametrize("transform", [
    lambda g: imaging.MixUp(alpha=0.4, num_classes=NUM_CLASSES, generator=g),
    lambda g: imaging.CutMix(alpha=1.0, num_classes=NUM_CLASSES, generator=g),
    lambda g: imaging.MixUpOrCutMix(mixup_alpha=0.2, cutmix_alpha=1.0, num_classes=NUM_CLASSES, generator=g),
], ids=["mixup", "cutmix", "either"])
def test_torchvision_pixels_and_targets_for_the_same_draw(transform):
    kinds = set()
    for seed in range(12):
        t = transform(seed)
        x, y = batch(seed=seed), labels()
        got_x, got_t = t(x.clone(), y)
        mix = t.last_mixes[0]
        kinds.add(mix[0])
        assert [m[1] for m in t.last_mixes] == [5, 0, 1, 2, 3, 4]  # rolled by one
        expected_x, expected_t = torchvision_mix(x, y, mix)
        assert torch.equal(got_x, expected_x)
        assert torch.equal(got_t, expected_t)
    assert kinds <= {"mixup", "cutmix"} and kinds


@pytest.mark.parametrize("mode", ["batch", "pair", "elem"])
def test_timm_pixels_and_targets_for_the_same_draws(mode):
    for seed in range(10):
        t = imaging.Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, mode=mode, label_smoothing=0.1,
                          num_classes=NUM_CLASSES, prob=0.9, generator=seed)
        x, y = batch(n=8, seed=seed), labels(8)
        got_x, got_t = t(x.clone(), y)
        assert [m[1] for m in t.last_mixes] == list(range(7, -1, -1))  # mirrored
        expected_x, expected_t = timm_mix(x, y, t.last_mixes, mode, 0.1)
        assert torch.equal(got_x, expected_x)
        assert torch.equal(got_t, expected_t)


@pytest.mark.parametrize("mode", ["batch", "elem"])
def test_uint8_batches_round_as_timms_collate(mode):
    for seed in range(8):
        t = imaging.Mixup(mixup_alpha=1.0, cutmix_alpha=0.0, mode=mode, num_classes=NUM_CLASSES, generator=seed)
        x = batch(n=6, dtype=torch.uint8, seed=seed)
        got, _ = t(x.clone(), labels())
        samples = x.numpy()
        for i, (kind, j, lam, _) in enumerate(t.last_mixes):
            lam = lam if mode == "batch" else np.float32(lam)
            expected = timm_blend(samples[i], samples[j], lam) if kind == "mixup" else samples[i]
            assert np.array_equal(got[i].numpy(), expected), (seed, i)


def test_uint8_mixup_is_within_rounding_of_the_float_mix():
    t = imaging.MixUp(alpha=0.2, num_classes=NUM_CLASSES, generator=4)
    x = batch(n=16, h=64, w=64, dtype=torch.uint8, seed=4)
    got, _ = t(x.clone(), labels(16))
    exact, _ = torchvision_mix(x.float(), labels(16), t.last_mixes[0])
    mse = float(((got.float() - exact) ** 2).mean())
    assert mse <= 1 / 12 + 1e-3
    assert 10 * np.log10(255 ** 2 / max(mse, 1e-12)) >= 50


def test_channels_last_batches_mix_as_channels_first():
    x = batch(n=4, seed=9)
    first, t1 = imaging.MixUpOrCutMix(num_classes=NUM_CLASSES, generator=7)(x.clone(), labels(4))
    last_in = x.permute(0, 2, 3, 1).contiguous().numpy()
    last, t2 = imaging.MixUpOrCutMix(num_classes=NUM_CLASSES, layout="NHWC", generator=7)(last_in, labels(4).numpy())
    assert np.array_equal(first.permute(0, 2, 3, 1).numpy(), last)
    assert np.array_equal(t1.numpy(), t2)


def test_tensors_mix_in_place_and_views_that_cannot_are_copied():
    x = batch(n=4, seed=1)
    t = imaging.MixUp(alpha=1.0, num_classes=NUM_CLASSES, generator=2)
    out, _ = t(x, labels(4))
    assert out is x
    strided = batch(n=4, seed=1).permute(0, 1, 3, 2)  # not contiguous
    before = strided.clone()
    out, _ = imaging.MixUp(alpha=1.0, num_classes=NUM_CLASSES, generator=2)(strided, labels(4))
    assert torch.equal(strided, before) and out.shape == strided.shape
    frozen = batch(n=4, seed=1).numpy()
    frozen.setflags(write=False)
    out, _ = imaging.MixUp(alpha=1.0, num_classes=NUM_CLASSES, generator=2)(frozen, labels(4))
    assert out is not frozen


def test_lambdas_follow_beta_alpha_alpha():
    draws = [C.batch_mix_draw("batch", 0.2, 0.0, None, 1.0, 0.5, True, 2, 8, 8, 5, n)[0][2] for n in range(6000)]
    reference = np.random.default_rng(0).beta(0.2, 0.2, 6000)
    _, p = ks_2samp(np.array(draws), reference)
    assert p > 0.01, p


def test_server_draws_make_the_same_targets():
    t = imaging.Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, mode="elem", num_classes=NUM_CLASSES, generator=3)
    x, y = batch(n=6, seed=3), labels()
    _, targets = t(x, y)
    assert np.array_equal(imaging.mix_targets(y.numpy(), t.last_mixes, NUM_CLASSES, 0.1), targets.numpy())


@pytest.mark.parametrize("make, message", [
    (lambda: imaging.Mixup(mode="rows"), "mode must be batch, pair or elem"),
    (lambda: imaging.Mixup(mixup_alpha=-1), "mixup alpha"),
    (lambda: imaging.Mixup(mixup_alpha=0, cutmix_alpha=0), "is needed"),
    (lambda: imaging.Mixup(prob=1.5), "mix probability"),
    (lambda: imaging.Mixup(cutmix_minmax=(0.8, 0.2)), "minmax"),
    (lambda: imaging.MixUp(num_classes=0), "num_classes must be a positive int"),
    (lambda: imaging.MixUp(num_classes=10, layout="HWC"), "layout must be NCHW or NHWC"),
])
def test_bad_options_are_refused_when_made(make, message):
    with pytest.raises(imaging.ArgumentError, match=message):
        make()


def test_batches_that_do_not_fit_are_refused():
    with pytest.raises(imaging.ArgumentError, match="even batch"):
        imaging.Mixup(num_classes=NUM_CLASSES)(batch(n=5), labels(5))
    with pytest.raises(imaging.ArgumentError, match="labels must have shape"):
        imaging.MixUp(num_classes=NUM_CLASSES)(batch(n=4), labels(5))
    with pytest.raises(imaging.ArgumentError, match="batch of images"):
        imaging.MixUp(num_classes=NUM_CLASSES)(batch(n=4)[0], labels(4))
    with pytest.raises(imaging.ArgumentError, match="uint8, float32 or float16"):
        imaging.MixUp(num_classes=NUM_CLASSES)(batch(n=4).double(), labels(4))
    with pytest.raises(imaging.ArgumentError, match="label 12 of sample 0"):
        imaging.MixUp(num_classes=NUM_CLASSES)(batch(n=2), torch.tensor([12, 1]))
    with pytest.raises(imaging.ArgumentError, match="partner 9 is outside"):
        C.batch_mix_apply(batch(n=2).numpy(), [("mixup", 9, 0.5, (0, 0, 0, 0)), ("none", 0, 1.0, (0, 0, 0, 0))],
                          False)
    with pytest.raises(imaging.ArgumentError, match="kind is mixup, cutmix or none"):
        C.batch_mix_targets(np.array([0]), [("blend", 0, 0.5, (0, 0, 0, 0))], 4)
