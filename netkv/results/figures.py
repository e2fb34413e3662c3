"""Figures as a paper needs them: every series visible, log axes where the
data span decades, saved as PNG (a quick look), SVG (the HTML report) and
PDF (papers)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from netkv.results.atomic import write_with

FORMATS = ("png", "svg", "pdf")
# a series drawn over another stays visible: its own marker and dash, hollow
# markers every other series
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
DASHES = ("-", "--", "-.", ":")


def style(i: int) -> dict[str, Any]:
    """The i-th series' look (color, marker, dash; hollow markers every other)."""
    out: dict[str, Any] = {"color": f"C{i % 10}", "marker": MARKERS[i % len(MARKERS)],
                           "linestyle": DASHES[i % len(DASHES)], "markersize": 6 - (i % 3),
                           "zorder": 3 + i % 10}
    if i % 2:
        out["markerfacecolor"] = "none"
    return out


def spans_decades(values: Iterable[float], ratio: float = 30.0) -> bool:
    """Positive finite values whose max/min exceeds ``ratio``: a linear
    axis would flatten the small ones (NetCache's 20 M req/s next to 1 M)."""
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    return len(finite) > 1 and max(finite) / min(finite) > ratio


def save(fig: Any, png: Path) -> list[Path]:
    """``fig`` as ``png`` and beside it as .svg and .pdf, each atomically."""
    import matplotlib.pyplot as plt

    paths = [png.with_suffix(f".{fmt}") for fmt in FORMATS]
    try:
        for path, fmt in zip(paths, FORMATS):
            write_with(path, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt))
    finally:
        plt.close(fig)
    return paths
