"""MixUp/CutMix on NumPy batches without torch (NumPy 1 and 2): the
transforms mix in place, the soft targets come as float32 arrays, and the
draws of a server's "mix" tensor make the same targets."""
import numpy as np
import pytest

from tensorcom import imaging


def test_numpy_batches_mix_in_place_with_soft_targets():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (4, 6, 5, 3), dtype=np.uint8)
    before = images.copy()
    labels = np.array([0, 1, 2, 3])
    mix = imaging.MixUp(alpha=1.0, num_classes=4, layout="NHWC", generator=3)
    out, targets = mix(images, labels)
    assert out is images and targets.dtype == np.float32 and targets.shape == (4, 4)
    kind, partner, lam, _ = mix.last_mixes[0]
    assert kind == "mixup" and partner == 3
    expected = np.rint(before[0].astype(np.float32) * np.float32(lam) +
                       before[3].astype(np.float32) * np.float32(1.0 - lam))
    assert np.array_equal(out[0], expected.astype(np.uint8))
    assert np.allclose(targets.sum(axis=1), 1.0)
    assert np.isclose(targets[0, 0], lam, atol=1e-6) and np.isclose(targets[0, 3], 1 - lam, atol=1e-6)


def test_served_draws_make_targets_and_bad_ones_are_refused():
    draws = np.array([[1, 1, 0.25, 0, 0, 0, 0], [2, 0, 0.5, 0, 0, 2, 2], [0, 2, 1, 0, 0, 0, 0]])
    targets = imaging.mix_targets(np.array([3, 1, 2]), draws, 4, label_smoothing=0.0)
    assert np.allclose(targets, [[0, 0.75, 0, 0.25], [0, 0.5, 0, 0.5], [0, 0, 1, 0]])
    with pytest.raises(imaging.ArgumentError, match="label 7 of sample 0"):
        imaging.mix_targets(np.array([7, 1, 2]), draws, 4)
    with pytest.raises(imaging.ArgumentError, match="partner is outside the batch"):
        imaging.mix_targets(np.array([1, 1]), draws[:2] * [1, 5, 1, 1, 1, 1, 1], 4)


def test_float_batches_that_are_not_writable_are_mixed_in_a_copy():
    batch = np.linspace(-2, 2, 2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    batch.setflags(write=False)
    out, targets = imaging.CutMix(alpha=1.0, num_classes=2, generator=1)(batch, np.array([0, 1]))
    assert out is not batch and out.dtype == np.float32 and targets.shape == (2, 2)


def test_draws_and_recipes_that_do_not_fit_are_refused():
    draws = np.array([[1, 1, 0.25, 0, 0, 0, 0], [1, 0, 0.25, 0, 0, 0, 0]])
    with pytest.raises(imaging.ArgumentError, match="do not match"):
        imaging.mix_targets(np.array([0, 1, 2]), draws, 4)
    with pytest.raises(imaging.ArgumentError, match="not finite"):
        imaging.mix_targets(np.array([0, 1]), draws * [1, 1, np.inf, 1, 1, 1, 1], 4)
    from tensorcom import recipes
    for bad in (["size"], [1, 2], "size"):
        with pytest.raises(recipes.ArgumentError, match="not flag, value pairs"):
            recipes.served_flags({"recipe": bad})
    assert recipes.served_flags({}) == {}
