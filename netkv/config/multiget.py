"""Multiget sizes: a discrete power law truncated to [1, max_keys].

P(k) ∝ k^-s for k = 1..max_keys. The exponent s is solved so that the mean
size is the configured one (NetMC's Rein-trace mean of 8.6, digest §7 and
§9.10); the mean falls monotonically as s grows, so bisection finds it. A
mean of 1 means single-key requests (no multigets).
"""

from __future__ import annotations

import numpy as np

EXPONENT_RANGE = (-60.0, 60.0)


def size_weights(max_keys: int, exponent: float) -> np.ndarray:
    """P(k) for k = 1..max_keys (normalised, computed in log space)."""
    k = np.arange(1, max_keys + 1, dtype=np.float64)
    logw = -exponent * np.log(k)
    w = np.exp(logw - logw.max())
    return w / w.sum()


def mean_size(max_keys: int, exponent: float) -> float:
    w = size_weights(max_keys, exponent)
    return float(np.dot(w, np.arange(1, max_keys + 1)))


def solve_exponent(mean: float, max_keys: int) -> float:
    """The s whose truncated power law on [1, max_keys] has this mean
    (1 < mean < max_keys); ValueError otherwise."""
    if not 1.0 < mean < max_keys:
        raise ValueError(f"mean {mean:g} outside (1, {max_keys})")
    lo, hi = EXPONENT_RANGE
    if not mean_size(max_keys, hi) < mean < mean_size(max_keys, lo):
        raise ValueError(f"mean {mean:g} is too close to 1 or {max_keys}")
    for _ in range(200):
        mid = (lo + hi) / 2
        if mean_size(max_keys, mid) > mean:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2
