"""Test pictures and how close two are, shared by the fidelity tests of the
servers (tests/fidelity) and of tensorcom.imaging (tests/bindings)."""
import numpy as np


def textured(rng, height, width):
    """A picture with edges, gradients and fine texture: aliasing shows on it.
    rng: a numpy Generator, or a seed for one."""
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    base = 128 + 60 * np.sin(x / 7.0 + rng.uniform(0, 6)) * np.cos(y / 5.0)
    stripes = 40 * np.sign(np.sin((x + 2 * y) / 3.0))
    noise = rng.normal(0, 18, (height, width))
    channels = [base + stripes + noise, base[::-1] - stripes + noise, 255 - base + noise / 2]
    return np.clip(np.stack(channels, -1), 0, 255).astype(np.uint8)


def psnr(a, b):
    """Peak signal-to-noise ratio in dB of two uint8 images; 99 for identical ones."""
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0**2 / mse)
