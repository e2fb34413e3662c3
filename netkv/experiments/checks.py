"""Evaluate an experiment's claims against its measured tables.

``evaluate``: a ``compare`` check of a grid experiment, on results.parquet.
``evaluate_timeline``: a ``recovery`` or ``no_violation`` check of a timeline
experiment, on its timeline.parquet (one row per window: series, x, t_s,
completed, p99_us, slo_us, ...) and results.parquet (one row per cell:
changes_s, window_s, duration_s, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from rich.console import Console
from rich.table import Table

from netkv.experiments.spec import Check, Experiment, RecoveryCheck, Ref, TimelineCheck


@dataclass
class CheckResult:
    claim: str
    paper: str
    measured: str
    passed: bool


def _fmt(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else str(value)


def _cell(table: pl.DataFrame, series: str, x: object, metric: str) -> float:
    rows = table.filter((pl.col("series") == series) & (pl.col("x") == str(x)))
    if rows.is_empty():
        return math.nan
    return float(rows[metric][0])


def _values(table: pl.DataFrame, ref: Ref, exp: Experiment, xs: list[object]) -> list[float]:
    if ref.value is not None:
        return [ref.value * ref.times for _ in xs]
    metric = ref.metric or exp.y.metric
    assert ref.series is not None
    return [_cell(table, ref.series, x, metric) * ref.times for x in xs]


def _label(ref: Ref, x: object) -> str:
    if ref.value is not None:
        return _fmt(ref.value * ref.times)
    times = f"{ref.times:g} x " if ref.times != 1.0 else ""
    return f"{times}{ref.series}@{x}"


def evaluate(check: Check, table: pl.DataFrame, exp: Experiment) -> CheckResult:
    xs: list[object] = list(exp.x.values) if check.left.x == "all" else [check.left.x]
    right_xs = xs if check.right.x == "all" else [check.right.x] * len(xs)
    left = _values(table, check.left, exp, xs)
    right = [
        v for x in right_xs
        for v in _values(table, check.right.model_copy(update={"x": x}), exp, [x])
    ]
    parts, ok = [], True
    for x, rx, lv, rv in zip(xs, right_xs, left, right):
        if not (math.isfinite(lv) and math.isfinite(rv)):
            ok = False
            parts.append(f"{_label(check.left, x)} missing")
            continue
        if check.op == ">=":
            good = lv >= rv
        elif check.op == "<=":
            good = lv <= rv
        else:
            good = rv != 0 and abs(lv / rv - 1.0) <= check.tolerance
        ok &= good
        if check.op == "within":
            ratio = lv / rv if rv else math.inf
            parts.append(f"{_label(check.left, x)}/{_label(check.right, rx)} = {_fmt(ratio)}")
        else:
            parts.append(f"{_label(check.left, x)} = {_fmt(lv)} {check.op} "
                         f"{_label(check.right, rx)} = {_fmt(rv)}")
    return CheckResult(check.claim, check.paper, "; ".join(parts), ok)


# --- timeline experiments ------------------------------------------------------------

EPS_S = 1e-9


def cell_windows(timeline: pl.DataFrame, series: str, x: object) -> pl.DataFrame:
    """One cell's windows (series, x) from an experiment's timeline table, by time."""
    if timeline.is_empty():
        return timeline
    return timeline.filter((pl.col("series") == series) & (pl.col("x") == str(x))).sort("t_s")


def windows_over(windows: pl.DataFrame) -> np.ndarray:
    """True for windows whose p99 is above the SLO, or that completed nothing."""
    p99 = windows["p99_us"].to_numpy()
    slo = windows["slo_us"].to_numpy()
    done = windows["completed"].to_numpy()
    return (p99 > slo) | (done == 0)


def recovery_ms(t_s: np.ndarray, window_s: float, over: np.ndarray, changes: list[float],
                end_s: float) -> list[float]:
    """For each change instant: how long until the windowed p99 is back under
    the SLO for good, i.e. the end of the last window above the SLO before the
    next change, minus the change (0 if none; inf if the last window before
    the next change is still above). A window belongs to the change it
    overlaps last."""
    out = []
    bounds = [*changes[1:], end_s]
    for change, nxt in zip(changes, bounds):
        sel = (t_s + window_s > change + EPS_S) & (t_s < nxt - EPS_S)
        ts, bad = t_s[sel], over[sel]
        if not bad.any():
            out.append(0.0)
            continue
        last = int(np.flatnonzero(bad)[-1])
        if last == len(bad) - 1:
            out.append(math.inf)
        else:
            out.append(max(float(ts[last]) + window_s - change, 0.0) * 1e3)
    return out


def _cell_row(results: pl.DataFrame, series: str, x: object) -> dict[str, Any] | None:
    rows = results.filter((pl.col("series") == series) & (pl.col("x") == str(x)))
    return None if rows.is_empty() else rows.row(0, named=True)


def cell_recoveries(timeline: pl.DataFrame, results: pl.DataFrame, series: str, x: object,
                    warmup_s: float) -> tuple[list[float], list[float]] | None:
    """(change instants from warmup_s on, recovery after each) of one cell."""
    row = _cell_row(results, series, x)
    windows = cell_windows(timeline, series, x)
    if row is None or windows.is_empty():
        return None
    changes = [c for c in (row["changes_s"] or []) if c >= warmup_s - EPS_S]
    t_s = windows["t_s"].to_numpy()
    recs = recovery_ms(t_s, float(row["window_s"]), windows_over(windows), changes,
                       float(row["duration_s"]))
    return changes, recs


def _ms(value: float) -> str:
    return f"{value:.0f}" if math.isfinite(value) else "never"


def evaluate_timeline(check: TimelineCheck, results: pl.DataFrame, timeline: pl.DataFrame,
                      exp: Experiment) -> CheckResult:
    """A ``recovery`` or ``no_violation`` check on the windows of timeline.parquet."""
    assert exp.timeline is not None
    warmup = exp.timeline.warmup_s
    xs = list(exp.x.values) if check.x == "all" else [check.x]
    parts, ok = [], True
    for x in xs:
        label = f"{check.series}@{x}"
        if isinstance(check, RecoveryCheck):
            got = cell_recoveries(timeline, results, check.series, x, warmup)
            if got is None or not got[0]:
                ok = False
                parts.append(f"{label}: {'missing' if got is None else 'no change measured'}")
                continue
            changes, recs = got
            good = all(r <= check.within_ms for r in recs)
            ok &= good
            at = ", ".join(f"{c:g}" for c in changes)
            parts.append(f"{label}: back under the SLO {', '.join(_ms(r) for r in recs)} ms "
                         f"after the changes at {at} s (max {_ms(max(recs))} ms "
                         f"{'<=' if good else '>'} {check.within_ms:g})")
        else:
            windows = cell_windows(timeline, check.series, x)
            if windows.is_empty():
                ok = False
                parts.append(f"{label}: missing")
                continue
            windows = windows.filter(pl.col("t_s") >= warmup - EPS_S)
            over = windows_over(windows)
            count = int(over.sum())
            good = count <= check.allowed_windows
            ok &= good
            slo = float(windows["slo_us"][0]) if not windows.is_empty() else math.nan
            peak = float(windows["p99_us"].max()) if not windows.is_empty() else math.nan
            parts.append(f"{label}: {count} of {len(windows)} windows above the SLO "
                         f"({_fmt(slo)} us; max window p99 {_fmt(peak)} us)")
    return CheckResult(check.claim, check.paper, "; ".join(parts), ok)


def print_checks(results: list[CheckResult], console: Console) -> None:
    """The "paper says / we measured / pass" table."""
    if not results:
        return
    table = Table(title="paper says / we measured", title_justify="left")
    for col in ("claim", "paper says", "we measured", "pass"):
        table.add_column(col)
    for r in results:
        table.add_row(r.claim, r.paper, r.measured,
                      "[green]pass[/green]" if r.passed else "[red]FAIL[/red]")
    console.print(table)
