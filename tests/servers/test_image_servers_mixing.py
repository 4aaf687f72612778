"""MixUp/CutMix on the servers: a mixed batch is the unmixed batch of the
same seed mixed as its draws (the "mix" tensor) say, in torchvision's and
timm's arithmetic restated here in NumPy; the draws repeat with the seed;
flags that cannot work together are refused.

Run: TENSORCOM_BUILD_DIR=build pytest-3 -q -p no:cacheprovider tests/servers/
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_helpers as h  # noqa: E402
from image_server_data import run, shard_args  # noqa: E402

MIXUP, CUTMIX = 1, 2


def common(paths):
    return shard_args(paths) + ["--epochs", "1", "-b", "8", "-w", "1", "--shuffle", "0", "--size", "32",
                                "--seed", "5", "-r", "0"]


def mixed_as_drawn(images, draws, channels_last):
    """Each image mixed with its partner as its row of draws says."""
    out = images.copy()
    for i, (kind, partner, lam, x0, y0, x1, y1) in enumerate(draws):
        partner, x0, y0, x1, y1 = (int(v) for v in (partner, x0, y0, x1, y1))
        if kind == MIXUP:
            blend = (images[i].astype(np.float32) * np.float32(lam) +
                     images[partner].astype(np.float32) * np.float32(1.0 - lam))
            out[i] = np.rint(blend) if images.dtype == np.uint8 else blend
        elif kind == CUTMIX:
            if channels_last:
                out[i, y0:y1, x0:x1] = images[partner, y0:y1, x0:x1]
            else:
                out[i, :, y0:y1, x0:x1] = images[partner, :, y0:y1, x0:x1]
    return out


@pytest.mark.parametrize("extra, channels_last", [
    (["--mixup-alpha", "0.4", "--cutmix-alpha", "1.0"], True),
    (["--mixup-alpha", "0.8", "--cutmix-alpha", "1.0", "--mix-mode", "elem", "--mix-prob", "0.8",
      "--dtype", "float32", "--layout", "BCHW"], False),
], ids=["torchvision-uint8", "timm-elem-float32"])
def test_a_mixed_batch_is_the_unmixed_one_mixed_as_drawn(clean_data, rundir, extra, channels_last):
    paths, _ = clean_data
    plain_extra = [a for a in extra if a in ("--dtype", "float32", "--layout", "BCHW")]
    plain = run(common(paths) + plain_extra, rundir)
    mixed = run(common(paths) + extra, rundir)
    again = run(common(paths) + extra, rundir)
    assert plain.rc == mixed.rc == again.rc == 0, (plain.err, mixed.err)
    assert len(plain.batches) == len(mixed.batches) == 5
    kinds = set()
    for unmixed, batch, infos, repeat in zip(plain.batches, mixed.batches, mixed.infos, again.batches):
        assert len(batch) == 3 and infos[2] == "mix", infos
        images, labels, draws = batch
        assert draws.dtype == np.float64 and draws.shape == (len(labels), 7)
        assert np.array_equal(labels, unmixed[1])
        assert np.array_equal(images, mixed_as_drawn(unmixed[0], draws, channels_last))
        assert np.array_equal(draws, repeat[2]) and np.array_equal(images, repeat[0])
        kinds |= set(draws[:, 0].astype(int))
    assert {MIXUP, CUTMIX} <= kinds


def test_the_mix_tensor_comes_before_the_metadata(clean_data, rundir):
    paths, _ = clean_data
    r = run(common(paths) + ["--cutmix-alpha", "1.0", "--meta"], rundir)
    assert r.rc == 0, r.err
    assert [infos[2:] for infos in r.infos] == [["mix", "meta"]] * 5


@pytest.mark.parametrize("extra, message", [
    (["--mix-mode", "rows", "--mixup-alpha", "1"], "--mix-mode 'rows'"),
    (["--mix-prob", "0.5"], "--mix-prob needs --mixup-alpha or --cutmix-alpha"),
    (["--mixup-alpha", "-1"], "mixup alpha"),
    (["--cutmix-minmax", "0.9,0.1"], "minmax"),
    (["--cutmix-minmax", "0.2"], "--cutmix-minmax '0.2': expected MIN,MAX"),
    (["--mixup-alpha", "1", "--val"], "training augmentations"),
    (["--mixup-alpha", "1", "--random-erase", "0.25", "--meta"], "erase each image before it is mixed"),
])
def test_mixing_flags_that_cannot_work_are_refused(clean_data, extra, message):
    paths, _ = clean_data
    rc, _, err = h.run_plain(shard_args(paths) + ["--epochs", "1"] + extra + ["zpush+ipc:///tmp/tcs-nothing"])
    assert rc != 0 and message in err, err
