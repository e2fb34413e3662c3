"""KVSwitch's placement and threshold rules as pure functions: the ring
placement of r copies, r = ⌈L̂/T⌉, the fluid model of the server loads and
the prewarmed plan's T. Shared by the controller (netkv.protocols.kvswitch)
and the two-level model (netkv.protocols.kvswitch_racks), which the
controller's simulator factory uses in turn, so they live apart from both.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def placement(owner: int, r: int, m: int) -> list[int]:
    """Owner first, then r − 1 replicas on the ring with step ⌊M/r⌋ (digest §4.5)."""
    step = max(1, m // r)
    return [owner] + [(owner + j * step) % m for j in range(1, r)]


def copies(load: float, t: float, m: int) -> int:
    """r = min(⌈L̂/T⌉, M) for L̂ > T, else 1 (not installed)."""
    if load <= t or t <= 0:
        return 1
    return min(math.ceil(load / t), m)


def imbalance(loads: np.ndarray) -> float:
    """max/mean − 1 of the server loads (0 when idle)."""
    mean = float(loads.mean()) if len(loads) else 0.0
    return float(loads.max()) / mean - 1.0 if mean > 0 else 0.0


def fluid_loads(shares: np.ndarray, owners: np.ndarray, rs: np.ndarray, m: int,
                rest: np.ndarray) -> np.ndarray:
    """Per-server share of the load when key i (share shares[i], owner
    owners[i]) is read round-robin over its r copies; ``rest`` is the load of
    every other key, by owner. One numpy pass per distinct r: a rack model
    plans tens of thousands of keys, many times over."""
    import numpy as np
    loads = rest.astype(np.float64).copy()
    for r in np.unique(rs):
        sel = rs == r
        n = int(r)
        servers = (owners[sel][:, None] + np.arange(n) * max(1, m // n)) % m   # placement()
        np.add.at(loads, servers.ravel(), np.repeat(shares[sel] / n, n))
    return loads


def plan_threshold(shares: np.ndarray, owners: np.ndarray, m: int, t: float,
                   epsilon: float, gamma: float, rest: np.ndarray) -> float:
    """The prewarmed plan's T (a share of the load): lowered by γ from ``t``
    until the fluid model's max/mean − 1 <= ε, or every key is on all M."""
    import numpy as np
    for _ in range(200):
        rs = np.where(shares > t, np.minimum(np.ceil(shares / t), m), 1).astype(np.int64)
        if imbalance(fluid_loads(shares, owners, rs, m, rest)) <= epsilon or (rs == m).all():
            break
        t *= gamma
    return t
