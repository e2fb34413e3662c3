"""The checks of the figures that compare NetLR with Harmonia (experiments/
netlr/fig16, fig17): each holds (or differs, declared) on the values
measured here (the experiments' notes) and fails on wrong data."""

from __future__ import annotations

import polars as pl

from netkv.experiments.checks import evaluate
from netkv.experiments.spec import load_experiment

try:
    from test_netlr_hermes_figures import failing, table
except ImportError:
    from tests.test_netlr_hermes_figures import failing, table

H = "harmonia (not linearizable)"
INF = float("inf")
FIG16_P50 = {"netlr": [8.99, 8.99, 8.99, 9.38, 10.1, 12.58, 24.3, 4120],
             H: [9.06, 8.99, 9.06, 9.44, 10.1, 12.51, 24.4, 3270]}
FIG16_P99 = {"netlr": [30.4, 29.2, 30.5, 33.9, 36.5, 59.0, 130, 8620],
             H: [42.4, 44.2, 43.9, 50.0, 55.2, 82.7, 169, 18000]}
FIG17_P50 = {"netlr": [8.67, 8.99, 10.7, 13.7, 17.6, 22.2], H: [8.67, 9.06, 11.4, 23.2, 37.8, 50.3]}
FIG17_P99 = {"netlr": [28.7, 30.5, 37.8, 46.0, 54.4, 69.9], H: [28.7, 43.9, 62.8, 78.1, 93.4, 116]}
MEDIAN16 = "NetLR's median is below Harmonia's at every load both serve (25-600 K req/s)"


def us(p50: dict[str, list[float]], p99: dict[str, list[float]], fig: str) -> pl.DataFrame:
    exp = load_experiment(fig)
    return table(exp, {k: [v * 1e3 for v in vs] for k, vs in p99.items()}, "p99_ns",
                 p50_ns={k: [v * 1e3 for v in vs] for k, vs in p50.items()})


def test_fig16_checks() -> None:
    exp = load_experiment("netlr/fig16")
    measured = us(FIG16_P50, FIG16_P99, "netlr/fig16")
    results = {c.claim: evaluate(c, measured, exp) for c in exp.checks}  # type: ignore[arg-type]
    assert {k for k, r in results.items() if not r.passed} == {MEDIAN16}
    assert results[MEDIAN16].verdict == "differs"       # 12.58 vs 12.51 us at 450 K, declared
    # the paper's median gap would hold
    gap = {**FIG16_P50, H: [v + 1 for v in FIG16_P50["netlr"]]}
    assert failing(exp, us(gap, FIG16_P99, "netlr/fig16")) == set()
    # Harmonia saturating at 0.8 x NetLR: over 2 ms at 600 K
    early = {**FIG16_P99, H: [*FIG16_P99[H][:6], 5000, 18000]}
    assert failing(exp, us(gap, early, "netlr/fig16")) == {"... and so does Harmonia"}
    # or Harmonia still under 2 ms at 750 K: a higher saturation
    late = {**FIG16_P99, H: [*FIG16_P99[H][:7], 900]}
    assert failing(exp, us(gap, late, "netlr/fig16")) == {"... and so is Harmonia's"}
    # NetLR's tail above Harmonia's at one load
    tail = {**FIG16_P99, "netlr": [45, *FIG16_P99["netlr"][1:]]}
    assert failing(exp, us(gap, tail, "netlr/fig16")) == {
        "NetLR's p99 is below Harmonia's at every load both serve (25-600 K req/s)"}


def test_fig17_checks() -> None:
    exp = load_experiment("netlr/fig17")
    assert failing(exp, us(FIG17_P50, FIG17_P99, "netlr/fig17")) == set()
    # a constant gap: Harmonia always 13.4 us above NetLR (the steps fail)
    flat = {**FIG17_P99, H: [v + 13.4 for v in FIG17_P99["netlr"]]}
    assert failing(exp, us(FIG17_P50, flat, "netlr/fig17")) == {
        f"the p99 gap grows with the write ratio: {a} above {b}"
        for a, b in (("0.25", "0.05"), ("0.5", "0.25"), ("0.75", "0.5"), ("1.0", "0.75"))}
    # the gap shrinking once writes dominate
    shrink = {**FIG17_P99, H: [*FIG17_P99[H][:5], 100]}
    assert failing(exp, us(FIG17_P50, shrink, "netlr/fig17")) == {
        "the p99 gap grows with the write ratio: 1.0 above 0.75"}
    # NetLR's tail above Harmonia's at 5% writes
    above = {**FIG17_P99, "netlr": [28.7, 45, *FIG17_P99["netlr"][2:]]}
    bad = failing(exp, us(FIG17_P50, above, "netlr/fig17"))
    assert "NetLR's p99 is below Harmonia's at every write ratio with writes" in bad
    # medians equal write-only: the median gap does not grow
    same = {**FIG17_P50, H: [*FIG17_P50[H][:5], 22.2]}
    assert failing(exp, us(same, FIG17_P99, "netlr/fig17")) == {
        "the median gap is larger write-only than at 5% writes"}
