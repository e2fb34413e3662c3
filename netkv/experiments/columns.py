"""Which config columns define an experiment's series.

A series is a list of overrides; what it changes shows up in the cells'
``points.parquet`` as config columns (netkv.results.columns). The series
columns are the knobs whose values differ between series at the same x:
grouping the figure's points by them gives the figure's series back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from netkv.results.columns import knob_columns, varying

if TYPE_CHECKING:
    from netkv.experiments.spec import Experiment

LABELS = frozenset({"name"})  # derived from other knobs: a label, not a knob

# the points that make up the figure: a grid's searches, a timeline's long runs
FIGURE_PHASES = {"grid": ("unloaded", "search"), "timeline": ("fixed",)}


def cell_overrides(exp: "Experiment", extra: list[str] | None = None
                   ) -> dict[tuple[str, str], tuple[str, ...]]:
    """(series, str(x)) -> the overrides of the run whose points the figure shows."""
    extra = list(extra or [])
    if exp.kind == "timeline":
        from netkv.experiments.timeline import run_overrides

        return {(s, str(x)): run_overrides(exp, s, x, extra)
                for s in exp.series for x in exp.x.values}
    from netkv.experiments.reproduce import cells

    return {(c.series, str(c.x)): c.overrides for c in cells(exp, extra)}


def cell_knobs(exp: "Experiment", extra: list[str] | None = None
               ) -> dict[tuple[str, str], dict[str, Any]]:
    """Every cell's knob columns, from its composed config (nothing runs)."""
    from netkv.config.compose import load

    return {cell: knob_columns(load(list(o))) for cell, o in cell_overrides(exp, extra).items()}


def series_columns(exp: "Experiment", knobs: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """The knob columns that differ between series at some x."""
    found: dict[str, None] = {}
    for x in exp.x.values:
        rows = [knobs[(s, str(x))] for s in exp.series if (s, str(x)) in knobs]
        found.update(dict.fromkeys(k for k in varying(rows) if k not in LABELS))
    return list(found)


def series_mismatches(points: pl.DataFrame, columns: list[str], series: list[str]) -> list[str]:
    """How grouping ``points`` (with a ``series`` label column) by
    ``columns`` fails to give exactly ``series``: a group holding several
    series (they look identical in the data), a series split over groups, a
    series missing; empty when the columns define the series."""
    missing = [c for c in columns if c not in points.columns]
    if missing:
        return [f"no column {c}" for c in missing]
    keys = [pl.col(c).cast(pl.String).fill_null("<null>") for c in columns] or [pl.lit("")]
    groups = points.with_columns(_group=pl.concat_str(keys, separator="\x1f"))
    problems = []
    for (group,), rows in groups.group_by("_group"):
        labels = sorted(set(rows["series"].to_list()))
        if len(labels) > 1:
            first = rows.row(0, named=True)
            shared = ", ".join(f"{c}={first[c]}" for c in columns)
            problems.append(f"series {', '.join(labels)} share one configuration ({shared})")
    for name in series:
        n = groups.filter(pl.col("series") == name)["_group"].n_unique()
        if n == 0:
            problems.append(f"series {name} has no point")
        elif n > 1:
            problems.append(f"series {name} spans {n} configurations")
    return problems
