"""Run an experiment's grid, then plot it and check it against the paper.

(``kind: timeline`` experiments go to netkv.experiments.timeline.)

Each cell (series x value) is an ordinary run in
``<out>/<series>/<key>=<value>/``; cells run in parallel (joblib) and resume
like any run. The experiment directory gets ``results.parquet`` (one row per
cell), ``plot.png`` and ``checks.md`` ("paper says / we measured / pass").
"""

from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table

from netkv.config.compose import load
from netkv.experiments.pool import Pool
from netkv.experiments.checks import (CheckResult, differs_text, evaluate, print_checks,
                                      summarize_verdicts)
from netkv.experiments.spec import Experiment
from netkv.results.atomic import write_parquet, write_text
from netkv.runner import check_supported


@dataclass(frozen=True)
class Cell:
    series: str
    x: float | int | str
    overrides: tuple[str, ...]

    def subdir(self, key: str) -> str:
        return f"{self.series}/{key}={self.x}"


Pins = dict[str, tuple[str, ...]]
"""Overrides that fix the SLO bound, by str(x); "" = every x."""


def cells(exp: Experiment, extra: list[str], pins: Pins | None = None) -> list[Cell]:
    out = []
    pins = pins or {}
    for series, series_overrides in exp.series.items():
        for x in exp.x.values:
            per_value = exp.x.per_value.get(str(x), [])
            pin = pins.get(str(x), pins.get("", ()))
            at = [f"{exp.x.key}={x}"] if exp.x.override else []
            overrides = (*exp.overrides, *series_overrides, *at, *per_value, *extra, *pin)
            out.append(Cell(series, x, overrides))
    return out


SLO_DIR = "slo-reference"


def slo_bases(exp: Experiment, extra: list[str]) -> dict[str, list[str]]:
    """The configuration(s) the figure's SLO is measured on, by str(x) (""
    = one for every x): the experiment's overrides plus ``slo.base``, no
    series and no x (with ``slo.per_x``: plus each x)."""
    base = [*exp.overrides, *exp.slo.base]
    if not exp.slo.per_x:
        return {"": [*base, *extra]}
    return {str(x): [*base, *([f"{exp.x.key}={x}"] if exp.x.override else []),
                     *exp.x.per_value.get(str(x), []), *extra]
            for x in exp.x.values}


def pin_slo(exp: Experiment, extra: list[str], out: Path, console: Console) -> Pins:
    """Measure the figure's SLO once (the reference protocol's unloaded
    median on the base configuration, in ``<out>/slo-reference/``) and return
    the overrides that give every cell that same bound."""
    from netkv.runner import measure_slo_ns

    pins: Pins = {}
    for x, overrides in slo_bases(exp, extra).items():
        folder = out / SLO_DIR / (f"{exp.x.key}={x}" if x else "")
        slo_ns = measure_slo_ns(load([*overrides, f"out='{folder}'"]), folder,
                                ["reproduce", *overrides],
                                Console(file=io.StringIO()))
        if slo_ns is None:  # a fixed bound is one already; reference=self is per protocol
            pins[x] = ()
            continue
        pins[x] = ("slo.kind=fixed", f"slo.p99_us={slo_ns / 1e3!r}")
        console.print(f"  SLO{f' at {exp.x.key}={x}' if x else ''}: {slo_ns / 1e3:.1f} us "
                      f"(reference measured in {folder})")
    return pins


def run_cell(cell: Cell, out_dir: str, load_rps: float | None = None,
             columns: tuple[str, ...] = ()) -> dict[str, Any]:
    """One cell as a run (module-level so that joblib workers and submitit
    jobs can call it): an SLO search, or with ``load_rps`` one point at that
    load."""
    from netkv.runner import execute, execute_at

    cfg = load([*cell.overrides, f"out='{out_dir}'"])
    console = Console(file=io.StringIO())
    argv = ["reproduce", *cell.overrides]
    if load_rps is None:
        points = execute(cfg, Path(out_dir), argv, console)
        best = points.filter(pl.col("best")) if not points.is_empty() else points
    else:
        points = execute_at(cfg, Path(out_dir), argv, console, load_rps, math.inf)
        best = points
    row: dict[str, Any] = {"series": cell.series, "x": str(cell.x), "run": out_dir}
    slo_us = float(points["slo_ns"][0]) / 1e3 if not points.is_empty() else math.nan
    if best.is_empty():  # "none met": no value, never 0 (a check touching it fails)
        row.update(met=False, max_tput_mrps=math.nan, p50_us=math.nan, p99_us=math.nan,
                   max_over_mean=math.nan, max_server_share=math.nan, slo_us=slo_us,
                   imbalance=math.nan, sat_tput_mrps=math.nan, achieved_mrps=math.nan,
                   **{c: math.nan for c in columns})
    else:
        b = best.row(0, named=True)
        row.update(met=True, max_tput_mrps=b["achieved_rps"] / 1e6, p50_us=b["p50_ns"] / 1e3,
                   p99_us=b["p99_ns"] / 1e3, max_over_mean=b["max_over_mean"],
                   max_server_share=b["max_server_share"], slo_us=slo_us,
                   imbalance=b.get("imbalance", math.nan),
                   sat_tput_mrps=b.get("sat_tput_rps", math.nan) / 1e6,
                   achieved_mrps=b["achieved_rps"] / 1e6,
                   **{c: _scalar(b.get(c)) for c in columns})
    return row


def _scalar(value: Any) -> float:
    """A point column as a cell value (missing: NaN, a check touching it fails)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def default_out(name: str) -> Path:
    stamp = datetime.now().strftime("%Y-%m-%d/%H-%M-%S")
    return Path("runs") / "reproduce" / name.replace("/", "-") / stamp


def plot(exp: Experiment, table: pl.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    numeric = all(isinstance(v, (int, float)) for v in exp.x.values)
    positions = list(exp.x.values) if numeric else list(range(len(exp.x.values)))
    for series in exp.series:
        ys = []
        for x in exp.x.values:
            rows = table.filter((pl.col("series") == series) & (pl.col("x") == str(x)))
            ys.append(float(rows[exp.y.metric][0]) if not rows.is_empty() else math.nan)
        ax.plot(positions, ys, marker="o", label=series)
    if not numeric:
        ax.set_xticks(positions, [str(v) for v in exp.x.values])
    if exp.logy:
        ax.set_yscale("log")
    ax.set_xlabel(exp.x.label or exp.x.key)
    ax.set_ylabel(exp.y.label or exp.metrics()[exp.y.metric])
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)


def checks_markdown(exp: Experiment, results: list[CheckResult]) -> str:
    counts = summarize_verdicts(results)
    lines = [f"# {exp.description}", "", f"Source: {exp.paper}", "",
             f"{counts['holds']} of {len(results)} claims hold as the paper states them; "
             f"{counts['differs']} differ (declared, with the reason); {counts['FAIL']} fail.",
             "", "| claim (the paper's) | paper says | we measured | verdict | why it differs |",
             "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.claim} | {r.paper} | {r.measured} | {r.verdict} | "
                     f"{differs_text(r)} |")
    if exp.notes:
        lines += ["", exp.notes.strip()]
    return "\n".join(lines) + "\n"


def slo_markdown(table: pl.DataFrame) -> str:
    """The bound(s) the cells were judged against (one per figure)."""
    if table.is_empty() or "slo_us" not in table.columns:
        return ""
    bounds = sorted({round(float(v), 3) for v in table["slo_us"].to_list()})
    text = ", ".join(f"{b:g} us" for b in bounds)
    one = "one bound for every cell" if len(bounds) == 1 else "one per x (slo.per_x)"
    return f"SLO: {text} ({one}; reference run in `{SLO_DIR}/`)\n"


def write_checks(out: Path, exp: Experiment, results: list[CheckResult],
                 appendix: str = "") -> None:
    """checks.md (the table, the notes, then ``appendix``) and checks.parquet."""
    text = checks_markdown(exp, results)
    if appendix:
        text = text.rstrip("\n") + "\n\n" + appendix
    write_text(out / "checks.md", text)
    write_parquet(out / "checks.parquet", pl.DataFrame(
        [{"claim": r.claim, "paper": r.paper, "measured": r.measured, "pass": r.passed,
          "verdict": r.verdict, "used": r.used, "by": r.by, "why": r.why}
         for r in results]) if results else pl.DataFrame())


def reproduce_sweep(exp: Experiment, name: str, extra: list[str], out: Path | None,
                    jobs: int | Pool, console: Console) -> list[CheckResult]:
    """Run, plot and check sweep experiment ``name``; the checks' results
    (``checks.exit_code`` turns them into the command's exit code)."""
    for cell in cells(exp, extra):  # every cell's config is valid before anything runs
        check_supported(load(list(cell.overrides)))
    out = out or default_out(name)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    # a fixed-load figure judges no SLO: nothing to pin
    grid = cells(exp, extra, pin_slo(exp, extra, out, console) if exp.load_rps is None else {})
    pool = jobs if isinstance(jobs, Pool) else Pool(jobs)
    console.print(f"{name}: {exp.description} ({len(grid)} runs, {pool.describe()}) -> {out}")
    dirs = [str(out / cell.subdir(exp.x.key)) for cell in grid]
    if pool.jobs > 1 or pool.launcher != "joblib":
        rows = pool.map(run_cell, [(cell, d, exp.load_rps, tuple(exp.columns))
                                   for cell, d in zip(grid, dirs)], out)
    else:
        rows = []
        for i, (cell, d) in enumerate(zip(grid, dirs), 1):
            console.print(f"  [{i}/{len(grid)}] {cell.series} {exp.x.key}={cell.x}")
            rows.append(run_cell(cell, d, exp.load_rps, tuple(exp.columns)))
    table = pl.DataFrame(rows)
    write_parquet(out / "results.parquet", table)
    plot(exp, table, out / "plot.png", f"{name}: {exp.description}")
    results = [evaluate(check, table, exp) for check in exp.checks]
    write_checks(out, exp, results, slo_markdown(table) if exp.load_rps is None else
                 f"Every cell: one point at {exp.load_rps:,.0f} req/s offered (no SLO search).\n")
    show(exp, table, results, console)
    console.print(f"{name}: {time.monotonic() - started:.0f} s; plot {out / 'plot.png'}, "
                  f"table {out / 'checks.md'}")
    return results


def show(exp: Experiment, table: pl.DataFrame, results: list[CheckResult],
         console: Console) -> None:
    grid = Table(title=exp.y.label or exp.metrics()[exp.y.metric], title_justify="left")
    grid.add_column("series")
    for x in exp.x.values:
        grid.add_column(f"{exp.x.key}={x}", justify="right")
    for series in exp.series:
        cells_text = []
        for x in exp.x.values:
            rows = table.filter((pl.col("series") == series) & (pl.col("x") == str(x)))
            if rows.is_empty():
                cells_text.append("-")
            elif "met" in rows.columns and not rows["met"][0]:
                cells_text.append("none met")
            else:
                cells_text.append(f"{rows[exp.y.metric][0]:.3g}")
        grid.add_row(series, *cells_text)
    console.print(grid)
    print_checks(results, console)
