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


def balance_columns(requests: np.ndarray) -> dict[str, float]:
    """The dataset's per-point balance columns from each server's request
    count. NaN when no server served a request (the switch answered all):
    a ratio of loads is then undefined, and 0 would read as the worst
    balance in ``min_over_max`` but the best in ``imbalance``."""
    import numpy as np
    arr = np.asarray(requests, dtype=np.float64)
    if not len(arr) or arr.sum() <= 0:
        nan = float("nan")
        return {"max_server_share": nan, "max_over_mean": nan, "min_over_max": nan,
                "imbalance": nan}
    return {
        "max_server_share": float(arr.max() / arr.sum()),
        "max_over_mean": float(arr.max() / arr.mean()),
        "min_over_max": float(arr.min() / arr.max()),  # balancing efficiency
        "imbalance": imbalance_factor(arr),
    }
