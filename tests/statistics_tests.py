"""Two-sample tests for the augmentation tests: whether our draws follow
the reference's (torchvision's, timm's). NumPy only (no SciPy here)."""
import math

import numpy as np


def chi2_sf(x, k):
    """P(X > x) for a chi-square variable of k degrees of freedom: the
    regularized upper incomplete gamma Q(k/2, x/2), by its series."""
    a, z = k / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    term = total = 1.0 / a
    n = 1
    while term > total * 1e-15 and n < 100000:
        term *= z / (a + n)
        total += term
        n += 1
    lower = total * math.exp(-z + a * math.log(z) - math.lgamma(a))
    return max(0.0, 1.0 - lower)


def chi_square_p(ours, theirs):
    """Two-sample chi-square test of homogeneity over the categories seen."""
    categories = sorted(set(ours) | set(theirs))
    n1, n2 = sum(ours.values()), sum(theirs.values())
    statistic = 0.0
    for c in categories:
        a, b = ours.get(c, 0), theirs.get(c, 0)
        expected_a = (a + b) * n1 / (n1 + n2)
        expected_b = (a + b) * n2 / (n1 + n2)
        statistic += (a - expected_a) ** 2 / expected_a + (b - expected_b) ** 2 / expected_b
    return chi2_sf(statistic, len(categories) - 1), len(categories)


def ks_2samp(a, b):
    """Two-sample Kolmogorov-Smirnov statistic and its asymptotic p-value."""
    a, b = np.sort(a), np.sort(b)
    values = np.concatenate([a, b])
    d = np.max(np.abs(np.searchsorted(a, values, side="right") / len(a) -
                      np.searchsorted(b, values, side="right") / len(b)))
    en = math.sqrt(len(a) * len(b) / (len(a) + len(b)))
    lam = (en + 0.12 + 0.11 / en) * d
    p = 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
    return d, min(max(p, 0.0), 1.0)


def ks_statistic(a, b):
    """The two-sample Kolmogorov-Smirnov statistic D."""
    return float(ks_2samp(np.asarray(a), np.asarray(b))[0])


def ks_critical(n, m, alpha=0.01):
    """D above which two samples of n and m differ at level alpha (asymptotic)."""
    return math.sqrt(-0.5 * math.log(alpha / 2)) * math.sqrt((n + m) / (n * m))
