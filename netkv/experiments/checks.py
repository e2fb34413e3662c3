"""Evaluate an experiment's claims against its measured tables.

``evaluate``: a ``compare`` check of a grid experiment, on results.parquet.
``evaluate_timeline``: a ``recovery`` or ``no_violation`` check of a timeline
experiment, on its timeline.parquet (one row per window: series, x, t_s,
completed, p99_ns, slo_ns, ...) and results.parquet (one row per cell:
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

from netkv.experiments.spec import (Check, Experiment, RecoveryCheck, Ref, RunCheck,
                                   ThroughputCheck, TimelineCheck, display, pairing_error,
                                   ref_xs, shown)


VERDICTS = ("holds", "differs", "FAIL")


@dataclass
class CheckResult:
    """One claim evaluated at the paper's value.

    ``verdict``: ``holds`` (true as the paper states it), ``differs`` (false,
    and the experiment declares why ours differs: ``differs``) or ``FAIL``
    (false and undeclared, or it could not be evaluated: a missing or "none
    met" cell, nothing to compare)."""

    claim: str
    paper: str
    measured: str
    passed: bool          # holds as the paper states it
    used: int = 0         # cells, or windows, the verdict rests on
    verdict: str = "FAIL"
    why: str = ""         # the declared reason ours differs
    by: str = ""          # by how much it misses the paper's value


def verdict(passed: bool, measurable: bool, differs: str) -> str:
    if passed:
        return "holds"
    return "differs" if measurable and differs else "FAIL"


def _ref_name(ref: Ref) -> str:
    return ref.series or _fmt(ref.value or math.nan)


def _fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}" if math.isfinite(value) else str(value)


def _digits(a: float, b: float) -> int:
    """Significant digits (3 at least) that print two different values
    differently: a claim missing its bound by a hair read "1 <= 1 = 1" and
    "misses the bound by 1 x"."""
    digits = 3
    while digits < 17 and a != b and _fmt(a, digits) == _fmt(b, digits):
        digits += 1
    return digits


def _factor(worst: float) -> str:
    """A miss factor, never shown as 1 when it is not."""
    return _fmt(worst, _digits(worst, 1.0))


NONE_MET = "none met"


def _cell(table: pl.DataFrame, series: str, x: object, metric: str) -> float | str:
    """A cell's value; "missing" (not run) or "none met" (no load passed)."""
    if table.is_empty() or metric not in table.columns:
        return "missing"
    rows = table.filter((pl.col("series") == series) & (pl.col("x") == str(x)))
    if rows.is_empty():
        return "missing"
    if "met" in rows.columns and not rows["met"][0]:
        return NONE_MET
    value = rows[metric][0]
    return "missing" if value is None else float(value)


def _values(table: pl.DataFrame, ref: Ref, exp: Experiment,
            xs: list[object]) -> list[float | str]:
    if ref.value is not None:
        return [ref.value * ref.times + ref.plus for _ in xs]
    metric = ref.metric or exp.y.metric
    assert ref.series is not None
    out: list[float | str] = []
    for x in xs:
        v = _cell(table, ref.series, x, metric)
        if ref.minus is not None and isinstance(v, float):
            less = _cell(table, ref.minus, x, metric)
            v = v - less if isinstance(less, float) else less
        out.append(v * ref.times + ref.plus if isinstance(v, float) else v)
    return out


def _unmeasured(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return "unbounded" if math.isinf(value) else "missing"


def _show(value: float, metric: str, digits: int = 3) -> str:
    """A stored value (rps, ns) as people read it (Mreq/s, us)."""
    if math.isinf(value) and value > 0:
        return "unbounded"
    unit = display(metric)[1]
    return (_fmt(shown(metric, value), digits)
            + (f" {unit}" if unit and math.isfinite(value) else ""))


def _metrics(check: Check, default: str) -> tuple[str, str]:
    """Each side's metric: its own, the other side's for a constant (a
    bound in that metric's units: `achieved_rps <= 255000`), or the
    figure's y."""
    left, right = check.left.metric, check.right.metric
    return (left or (right if check.left.value is not None and right else default),
            right or (left if check.right.value is not None and left else default))


def _label(ref: Ref, x: object, metric: str = "", digits: int = 3) -> str:
    if ref.value is not None:
        return _show(ref.value * ref.times + ref.plus, metric, digits)
    times = f"{ref.times:g} x " if ref.times != 1.0 else ""
    plus = f" + {_show(ref.plus, metric)}" if ref.plus else ""
    if ref.minus is not None:
        return f"{times}({ref.series} - {ref.minus})@{x}{plus}"
    return f"{times}{ref.series}@{x}{plus}"


def pairs(check: Check, exp: Experiment) -> list[tuple[object, object]]:
    """(left x, right x) pairs a check compares: by position when both sides
    name several x values (as many: spec.pairing_error), else the one x (or
    constant) of a side with each x of the other. A cell compared with
    itself (the same metric) is left out: it measures nothing."""
    if error := pairing_error(check, list(exp.x.values)):
        raise ValueError(error)
    xs, rxs = ref_xs(check.left, list(exp.x.values)), ref_xs(check.right, list(exp.x.values))
    todo = list(zip(xs * len(rxs) if len(xs) == 1 else xs,
                    rxs * len(xs) if len(rxs) == 1 else rxs))
    same = (check.left.value is None and check.right.value is None
            and check.left.series == check.right.series
            and check.left.metric == check.right.metric
            and check.left.minus == check.right.minus)
    return [(x, rx) for x, rx in todo if not (same and str(x) == str(rx))]


def _cells_used(check: Check, todo: list[tuple[object, object]]) -> int:
    used = set()
    for x, rx in todo:
        for ref, at in ((check.left, x), (check.right, rx)):
            if ref.value is None:
                used.add((ref.series, str(at)))
                if ref.minus is not None:
                    used.add((ref.minus, str(at)))
    return len(used)


def _usable(value: float, ordering: bool) -> bool:
    """NaN is never a measurement; +-inf is one for an ordering only."""
    return math.isfinite(value) or (ordering and math.isinf(value))


def _miss(op: str, lv: float, rv: float, tolerance: float) -> float:
    """How far a pair is from the claim, as a factor (1 = on the bound)."""
    if op == "within":
        return abs(lv / rv - 1.0) / tolerance if rv and tolerance else math.inf
    if op == ">=":
        return rv / lv if lv > 0 else math.inf
    return lv / rv if rv > 0 else math.inf


def evaluate(check: Check, table: pl.DataFrame, exp: Experiment) -> CheckResult:
    """``left op right`` at the paper's value, over every x pair. A missing
    or "none met" cell fails the check and says so; so does a check that
    compares no measured cell."""
    todo = pairs(check, exp)
    xs = [x for x, _ in todo]
    right_xs = [rx for _, rx in todo]
    left = _values(table, check.left, exp, xs)
    right = [
        v for x in right_xs
        for v in _values(table, check.right.model_copy(update={"x": x}), exp, [x])
    ]
    used = _cells_used(check, todo)
    # an unbounded value (+inf: a p99 with 1% or more of requests unanswered)
    # is measured and orders against a finite one; ratios cannot use it
    ordering = check.op in ("<=", ">=") and check.quantifier != "mean"
    measurable, worst, held, ratios = used > 0, 0.0, [], []
    parts: list[str] = [] if used else ["compares no measured cell"]
    for x, rx, lv, rv in zip(xs, right_xs, left, right):
        bad = [(ref, at, v) for ref, at, v in ((check.left, x, lv), (check.right, rx, rv))
               if not isinstance(v, float) or not _usable(v, ordering)]
        if not bad and isinstance(lv, float) and isinstance(rv, float) \
                and math.isinf(lv) and lv == rv:
            # both unbounded (e.g. two p99s past their knees): no order
            bad = [(check.left, x, "unbounded"), (check.right, rx, "unbounded")]
        if bad:
            measurable = False
            parts += [f"{_label(ref, at)} {_unmeasured(v)}"
                      for ref, at, v in bad]
            continue
        assert isinstance(lv, float) and isinstance(rv, float)
        ratios.append(lv / rv if rv else math.inf)
        if check.op == ">=":
            good = lv >= rv
        elif check.op == "<=":
            good = lv <= rv
        else:
            good = rv != 0 and abs(lv / rv - 1.0) <= check.tolerance
        held.append(good)
        miss = 0.0 if good else _miss(check.op, lv, rv, check.tolerance)
        worst = max(worst, miss) if check.quantifier == "all" or len(held) == 1 \
            else min(worst, miss)
        if check.op == "within":
            ratio = lv / rv if rv else math.inf
            parts.append(f"{_label(check.left, x)}/{_label(check.right, rx)} = {_fmt(ratio)}")
        else:
            # a constant is in the other side's metric (achieved_rps <= 255000)
            lm, rm = _metrics(check, exp.y.metric)
            digits = 3 if good else _digits(lv, rv)
            parts.append(f"{_label(check.left, x, lm, digits)} = {_show(lv, lm, digits)} "
                         f"{check.op} {_label(check.right, rx, rm, digits)} = "
                         f"{_show(rv, rm, digits)}")
    ok = measurable and bool(held) and (all(held) if check.quantifier == "all" else any(held))
    if check.quantifier == "any":
        parts.append(f"(any of {len(held)} pairs: {sum(held)} hold)")
    if check.quantifier == "mean":   # >= or <= (spec: never within)
        mean = float(np.mean(ratios)) if ratios else math.nan
        ok = measurable and bool(ratios) and (mean >= 1.0 if check.op == ">=" else mean <= 1.0)
        # the factor the mean ratio misses 1 by, as a pair's (_miss)
        worst = 0.0 if ok or not ratios else _miss(check.op, mean, 1.0, check.tolerance)
        parts.append(f"(mean {_ref_name(check.left)}/{_ref_name(check.right)} over "
                     f"{len(ratios)} pairs = {_fmt(mean * check.right.times)} x, claim "
                     f"{check.op} {_fmt(check.right.times)} x)")
    parts.append(f"({used} cell{'s' if used != 1 else ''})")
    by = ""
    if measurable and not ok:
        # all: the worst pair's; any: the best pair's (every pair misses by more)
        reach = "at least" if check.quantifier == "any" else "up to"
        by = (f"|ratio - 1| {reach} {_fmt(worst)} x the tolerance" if check.op == "within"
              else f"misses the bound by {_factor(worst)} x")
    text = "; ".join(parts[:-1]) + " " + parts[-1] if len(parts) > 1 else parts[0]
    return CheckResult(check.claim, check.paper, text, ok,
                       used, verdict(ok, measurable, check.differs), check.differs, by)


# --- timeline experiments ------------------------------------------------------------

EPS_S = 1e-9


def cell_windows(timeline: pl.DataFrame, series: str, x: object) -> pl.DataFrame:
    """One cell's windows (series, x) from an experiment's timeline table, by time."""
    if timeline.is_empty():
        return timeline
    return timeline.filter((pl.col("series") == series) & (pl.col("x") == str(x))).sort("t_s")


def windows_over(windows: pl.DataFrame) -> np.ndarray:
    """True for windows whose p99 is above the SLO, or that completed nothing."""
    p99 = windows["p99_ns"].to_numpy()
    slo = windows["slo_ns"].to_numpy()
    done = windows["completed"].to_numpy()
    return (p99 > slo) | (done == 0)


def recovery_ms(t_s: np.ndarray, window_s: float, over: np.ndarray, changes: list[float],
                end_s: float) -> list[float]:
    """For each change instant: how long until the windowed p99 is back under
    the SLO for good, i.e. the end of the last window above the SLO before the
    next change, minus the change (0 if none; inf if the last window before
    the next change is still above; nan if no window follows the change:
    nothing was measured, which is not a recovery). A window belongs to the
    change it overlaps last."""
    out = []
    bounds = [*changes[1:], end_s]
    for change, nxt in zip(changes, bounds):
        sel = (t_s + window_s > change + EPS_S) & (t_s < nxt - EPS_S)
        ts, bad = t_s[sel], over[sel]
        if not len(ts):
            out.append(math.nan)
            continue
        if not bad.any():
            out.append(0.0)
            continue
        last = int(np.flatnonzero(bad)[-1])
        if last == len(bad) - 1:
            out.append(math.inf)
        else:
            out.append(max(float(ts[last]) + window_s - change, 0.0) * 1e3)
    return out


def windows_after(t_s: np.ndarray, window_s: float, changes: list[float],
                  end_s: float) -> list[int]:
    """How many windows each change's recovery rests on (see recovery_ms)."""
    bounds = [*changes[1:], end_s]
    return [int(((t_s + window_s > c + EPS_S) & (t_s < n - EPS_S)).sum())
            for c, n in zip(changes, bounds)]


def _cell_row(results: pl.DataFrame, series: str, x: object) -> dict[str, Any] | None:
    rows = results.filter((pl.col("series") == series) & (pl.col("x") == str(x)))
    return None if rows.is_empty() else rows.row(0, named=True)


def cell_recoveries(timeline: pl.DataFrame, results: pl.DataFrame, series: str, x: object,
                    warmup_s: float) -> tuple[list[float], list[float], list[int]] | None:
    """(change instants from warmup_s on, recovery after each, windows after
    each) of one cell."""
    row = _cell_row(results, series, x)
    windows = cell_windows(timeline, series, x)
    if row is None or windows.is_empty():
        return None
    changes = [c for c in (row["changes_s"] or []) if c >= warmup_s - EPS_S]
    t_s = windows["t_s"].to_numpy()
    window_s, end_s = float(row["window_s"]), float(row["duration_s"])
    recs = recovery_ms(t_s, window_s, windows_over(windows), changes, end_s)
    return changes, recs, windows_after(t_s, window_s, changes, end_s)


def ms_text(value: float) -> str:
    if math.isnan(value):
        return "no window"
    return f"{value:.0f}" if math.isfinite(value) else "never"


def evaluate_timeline(check: TimelineCheck, results: pl.DataFrame, timeline: pl.DataFrame,
                      exp: Experiment) -> CheckResult:
    """A ``recovery`` or ``no_violation`` check on the windows of
    timeline.parquet. It fails when a cell has no window after the warm-up,
    or a change has no window after it: "nothing measured" never passes."""
    assert exp.timeline is not None
    if isinstance(check, ThroughputCheck):
        return evaluate_throughput(check, timeline, exp)
    if isinstance(check, RunCheck):
        return evaluate_run(check, results, exp)
    warmup = exp.timeline.warmup_s
    xs = list(exp.x.values) if check.x == "all" else [check.x]
    parts, ok, measurable, used, worst = [], True, True, 0, 0.0
    for x in xs:
        label = f"{check.series}@{x}"
        if isinstance(check, RecoveryCheck):
            got = cell_recoveries(timeline, results, check.series, x, warmup)
            if got is None or not got[0]:
                ok = measurable = False
                parts.append(f"{label}: {'missing' if got is None else 'no change measured'}")
                continue
            changes, recs, counts = got
            used += sum(counts)
            if not all(counts):
                ok = measurable = False
            good = all(n > 0 and r <= check.within_ms for r, n in zip(recs, counts))
            ok &= good
            finite = [r for r in recs if not math.isnan(r)]
            peak = max(finite) if finite else math.nan
            if not good and math.isfinite(peak) and peak > check.within_ms:
                worst = max(worst, peak / check.within_ms)
            at = ", ".join(f"{c:g}" for c in changes)
            parts.append(f"{label}: back under the SLO {', '.join(ms_text(r) for r in recs)} ms "
                         f"after the changes at {at} s (max {ms_text(peak)} ms "
                         f"{'<=' if good else '>'} {check.within_ms:g}; "
                         f"{sum(counts)} windows)")
        else:
            windows = cell_windows(timeline, check.series, x)
            if windows.is_empty():
                ok = measurable = False
                parts.append(f"{label}: missing")
                continue
            windows = windows.filter(pl.col("t_s") >= warmup - EPS_S)
            used += len(windows)
            if windows.is_empty():
                ok = measurable = False
                parts.append(f"{label}: no window after the warm-up ({warmup:g} s)")
                continue
            over = windows_over(windows)
            count = int(over.sum())
            good = count <= check.allowed_windows
            ok &= good
            if not good:
                worst = max(worst, count / max(check.allowed_windows, 1))
            slo = float(windows["slo_ns"][0]) / 1e3
            peak = float(windows["p99_ns"].max()) / 1e3
            parts.append(f"{label}: {count} of {len(windows)} windows above the SLO "
                         f"({_fmt(slo)} us; max window p99 {_fmt(peak)} us)")
    by = ""
    if measurable and not ok:
        by = (f"recovers {_factor(worst)} x slower than the bound"
              if isinstance(check, RecoveryCheck) and worst else
              f"{_fmt(worst)} x the windows allowed above the SLO" if worst else "")
    return CheckResult(check.claim, check.paper, "; ".join(parts), ok, used,
                       verdict(ok, measurable, check.differs), check.differs, by)


def _mean_completed(windows: pl.DataFrame, span: tuple[float, float]) -> tuple[float, int]:
    inside = windows.filter((pl.col("t_s") >= span[0] - EPS_S) & (pl.col("t_s") < span[1] - EPS_S))
    if inside.is_empty():
        return math.nan, 0
    return float(inside["completed"].mean()), len(inside)  # type: ignore[arg-type]


def evaluate_throughput(check: ThroughputCheck, timeline: pl.DataFrame,
                        exp: Experiment) -> CheckResult:
    """A ``throughput`` check: completions per window over a span against a
    fraction of their level over a reference span, in every x. No window in
    either span fails it."""
    xs = list(exp.x.values) if check.x == "all" else [check.x]
    parts, ok, measurable, used, worst = [], True, True, 0, 0.0
    for x in xs:
        label = f"{check.series}@{x}"
        windows = cell_windows(timeline, check.series, x)
        level, n = _mean_completed(windows, check.window_s)
        ref, m = _mean_completed(windows, check.reference_s)
        if not n or not m:
            ok = measurable = False
            parts.append(f"{label}: no window in {'the span' if not n else 'the reference'}")
            continue
        used += n + m
        bound = check.fraction * ref
        good = level >= bound if check.op == ">=" else level <= bound
        ok &= good
        if not good:
            worst = max(worst, level / bound if check.op == "<=" and bound else
                        bound / level if level else math.inf)
        ratio = level / ref if ref else math.nan
        parts.append(f"{label}: {_fmt(level)} completed per window in "
                     f"[{check.window_s[0]:g}, {check.window_s[1]:g}) s = {_fmt(ratio)} x "
                     f"the {_fmt(ref)} of [{check.reference_s[0]:g}, {check.reference_s[1]:g}) s "
                     f"({check.op} {check.fraction:g} x; {n + m} windows)")
    by = f"misses the bound by {_factor(worst)} x" if measurable and not ok and worst else ""
    return CheckResult(check.claim, check.paper, "; ".join(parts), ok, used,
                       verdict(ok, measurable, check.differs), check.differs, by)


def evaluate_run(check: RunCheck, results: pl.DataFrame, exp: Experiment) -> CheckResult:
    """A ``run`` check: a value of each x's long run against a constant. A
    missing run or value (NaN) fails it."""
    xs = list(exp.x.values) if check.x == "all" else [check.x]
    parts, ok, measurable, used, worst = [], True, True, 0, 0.0
    scale, unit = display(check.metric)
    for x in xs:
        label = f"{check.series}@{x}"
        value = _cell(results, check.series, x, check.metric)
        value = value if isinstance(value, float) else math.nan
        if math.isnan(value):
            ok = measurable = False
            parts.append(f"{label}: {check.metric} missing")
            continue
        used += 1
        good = value >= check.value if check.op == ">=" else value <= check.value
        ok &= good
        if not good:
            worst = max(worst, value / check.value if check.op == "<=" and check.value else
                        check.value / value if value else math.inf)
        parts.append(f"{label}: {check.metric} {_fmt(value * scale)}{unit and ' ' + unit} "
                     f"({check.op} {_fmt(check.value * scale)})")
    by = f"misses the bound by {_factor(worst)} x" if measurable and not ok and worst else ""
    return CheckResult(check.claim, check.paper, "; ".join(parts), ok, used,
                       verdict(ok, measurable, check.differs), check.differs, by)


def summarize_verdicts(results: list[CheckResult]) -> dict[str, int]:
    """How many checks hold as the paper states them, differ, or fail."""
    return {v: sum(r.verdict == v for r in results) for v in VERDICTS}


EXIT_HOLDS, EXIT_FAIL, EXIT_DIFFERS = 0, 1, 3


def exit_code(results: list[CheckResult]) -> int:
    """0: every claim holds as the paper states it. 1: a claim fails that the
    experiment does not declare as differing (a regression, or a check that
    measured nothing). 3: every claim that does not hold is a declared
    "differs" (a known, explained gap: CI accepts 0 or 3, never 1)."""
    counts = summarize_verdicts(results)
    if counts["FAIL"]:
        return EXIT_FAIL
    return EXIT_DIFFERS if counts["differs"] else EXIT_HOLDS


VERDICT_STYLE = {"holds": "[green]holds[/green]", "differs": "[yellow]differs[/yellow]",
                 "FAIL": "[red]FAIL[/red]"}


def differs_text(r: CheckResult) -> str:
    """The "differs" note of a row: by how much, and the declared reason."""
    if r.verdict != "differs":
        return ""
    return "; ".join(t for t in (r.by, r.why.strip()) if t)


def print_checks(results: list[CheckResult], console: Console) -> None:
    """The "paper says / we measured / verdict" table."""
    if not results:
        return
    table = Table(title="paper says / we measured", title_justify="left")
    for col in ("claim (the paper's)", "paper says", "we measured", "verdict", "why it differs"):
        table.add_column(col)
    for r in results:
        table.add_row(r.claim, r.paper, r.measured, VERDICT_STYLE[r.verdict], differs_text(r))
    console.print(table)
    counts = summarize_verdicts(results)
    console.print(f"{counts['holds']} of {len(results)} claims hold as the paper states them, "
                  f"{counts['differs']} differ (declared), {counts['FAIL']} fail")
