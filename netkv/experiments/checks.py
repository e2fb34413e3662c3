"""Evaluate an experiment's claims against its measured table."""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from netkv.experiments.spec import Check, Experiment, Ref


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
