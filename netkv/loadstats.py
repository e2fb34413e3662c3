"""Load-balance statistics shared by the dataset and the protocols."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def imbalance_factor(loads: np.ndarray) -> float:
    """λ = Σ_j |L_j − L̄| / (M·L̄), KVSwitch's imbalance factor (0 when idle):
    0 for equal loads, 2 − 2/M when one server takes everything."""
    import numpy as np
    arr = np.asarray(loads, dtype=np.float64)
    mean = float(arr.mean()) if len(arr) else 0.0
    return float(np.abs(arr - mean).sum() / (len(arr) * mean)) if mean > 0 else 0.0
