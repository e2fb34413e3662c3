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
from collections.abc import Callable
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
from netkv.experiments.spec import AT_SAT, LOAD_X, Experiment, at_sat, shown
from netkv.results.atomic import write_parquet, write_text
from netkv.experiments.saturation import saturation_rps
from netkv.interrupts import call_interruptible, joblib_workers
from netkv.results.columns import knob_columns
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
            at = [f"{exp.x.key}={x}"] if exp.x.override and exp.x.key != LOAD_X else []
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
    return {str(x): [*base, *([f"{exp.x.key}={x}"]
                              if exp.x.override and exp.x.key != LOAD_X else []),
                     *exp.x.per_value.get(str(x), []), *extra]
            for x in exp.x.values}


def pin_slo(exp: Experiment, extra: list[str], out: Path, console: Console,
            workloads: Path | None = None) -> Pins:
    """Measure the figure's SLO once (the reference protocol's unloaded
    median on the base configuration, in ``<out>/slo-reference/``) and return
    the overrides that give every cell that same bound."""
    from netkv.runner import measure_slo_ns
    from netkv.sim.workload_cache import WorkloadCache

    pins: Pins = {}
    cache = WorkloadCache(workloads)
    for x, overrides in slo_bases(exp, extra).items():
        folder = out / SLO_DIR / (f"{exp.x.key}={x}" if x else "")
        slo_ns = measure_slo_ns(load([*overrides, f"out='{folder}'"]), folder,
                                ["reproduce", *overrides],
                                Console(file=io.StringIO()), cache)
        if slo_ns is None:  # a fixed bound is one already; reference=self is per protocol
            pins[x] = ()
            continue
        pins[x] = ("slo.kind=fixed", f"slo.p99_us={slo_ns / 1e3!r}")
        console.print(f"  SLO{f' at {exp.x.key}={x}' if x else ''}: {slo_ns / 1e3:.1f} us "
                      f"(reference measured in {folder})")
    return pins


def run_cell(cell: Cell, out_dir: str, load_rps: float | None = None,
             columns: tuple[str, ...] = (), saturate: bool = False,
             workloads: str | None = None) -> dict[str, Any]:
    """One cell as a run (module-level so that joblib workers and submitit
    jobs can call it): an SLO search, or with ``load_rps`` one point at that
    load; ``saturate``: then sat_tput_rps measured at saturation
    (netkv.experiments.saturation), the fluid one kept as sat_fluid_rps.
    ``workloads``: the figure's folder of shared workload tables."""
    from netkv.runner import execute, execute_at
    from netkv.sim.workload_cache import WorkloadCache

    cfg = load([*cell.overrides, f"out='{out_dir}'"])
    console = Console(file=io.StringIO())
    argv = ["reproduce", *cell.overrides]
    cache = WorkloadCache(workloads)
    if load_rps is None:
        points = execute(cfg, Path(out_dir), argv, console, cache)
        best = points.filter(pl.col("best")) if not points.is_empty() else points
    else:
        points = execute_at(cfg, Path(out_dir), argv, console, load_rps, math.inf,
                            workloads=cache)
        best = points
    row: dict[str, Any] = {"series": cell.series, "x": str(cell.x), "run": out_dir,
                           **knob_columns(cfg)}
    slo_ns = float(points["slo_ns"][0]) if not points.is_empty() else math.nan
    if best.is_empty():  # "none met": no value, never 0 (a check touching it fails)
        row.update(met=False, max_tput_rps=math.nan, p50_ns=math.nan, p99_ns=math.nan,
                   max_over_mean=math.nan, max_server_share=math.nan, min_over_max=math.nan,
                   slo_ns=slo_ns,
                   imbalance=math.nan, sat_tput_rps=math.nan, sat_bottleneck="",
                   achieved_rps=math.nan,
                   **{c: math.nan for c in columns})
        if saturate and load_rps is None:  # nothing at saturation either
            row.update(sat_probes=0, **{at_sat(m): math.nan for m in (*AT_SAT, *columns)})
    else:
        b = best.row(0, named=True)
        row.update(met=True, max_tput_rps=b["achieved_rps"], p50_ns=b["p50_ns"],
                   p99_ns=b["p99_ns"], max_over_mean=b["max_over_mean"],
                   max_server_share=b["max_server_share"], slo_ns=slo_ns,
                   min_over_max=b.get("min_over_max", math.nan),
                   imbalance=b.get("imbalance", math.nan),
                   sat_tput_rps=b.get("sat_tput_rps", math.nan),
                   sat_bottleneck=b.get("sat_bottleneck") or "",
                   achieved_rps=b["achieved_rps"],
                   **{c: scalar(b.get(c)) for c in columns})
        if saturate and load_rps is None:
            sat = saturation_rps(cfg, Path(out_dir), argv, float(b["offered_rps"]),
                                 scalar(b.get("sat_tput_rps")), cache)
            # no probe sustainable: the floor, the best point, is the saturated one
            there = b if sat.row is None else sat.row
            row.update(sat_fluid_rps=row["sat_tput_rps"], sat_tput_rps=sat.rps,
                       sat_probes=sat.probes,
                       **{at_sat(m): scalar(there.get(m)) for m in (*AT_SAT, *columns)})
    return row


def warn_unsaturated(rows: list[dict[str, Any]], console: Console) -> None:
    """One line per saturating cell that met the SLO but had no fluid bound
    to search up to (the target knows no server capacity: Mininet, the
    testbed): its saturated throughput, and what is read at saturation, are
    the SLO search's best point's, not a saturation search's."""
    for r in rows:
        if r.get("met") and math.isnan(r.get("sat_fluid_rps", 0.0)):
            console.print(f"  [yellow]{r['series']} {r['x']}: no fluid bound (the target "
                          "knows no server capacity): its saturated throughput is the SLO "
                          "search's best load, not searched beyond it[/yellow]")


def scalar(value: Any) -> float:
    """A point column as a cell value (missing: NaN, a check touching it fails)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def with_probes(runs: list[tuple[str, str | None, Path]]
                ) -> list[tuple[str, str | None, Path, bool]]:
    """Each run, then the saturation probes it ran (``<run>/sat-<i>/``, by
    i: netkv.experiments.saturation) under its labels; True marks a probe."""
    out: list[tuple[str, str | None, Path, bool]] = []
    for series, x, folder in runs:
        probes = [p for p in folder.glob("sat-*") if p.name[4:].isdigit()]
        out += [(series, x, folder, False),
                *((series, x, p, True) for p in sorted(probes, key=lambda p: int(p.name[4:])))]
    return out


def write_points(out: Path, runs: list[tuple[str, str | None, Path]]) -> pl.DataFrame:
    """``<out>/points.parquet``: every point of every run of the experiment
    (cells, searches, their saturation probes, the SLO reference), labelled
    with its ``series`` and ``x`` (null where the run has none), its ``run``
    folder below ``out`` and ``sat_probe`` (a saturation probe's point). The
    labels are for checking: the config columns alone tell the series apart
    (netkv.experiments.columns)."""
    for ref in sorted((out / SLO_DIR).rglob("points.parquet")):
        runs = [*runs, ("", None, ref.parent)]
    frames = []
    for series, x, folder, probe in with_probes(runs):
        file = folder / "points.parquet"
        if not file.is_file():
            continue
        points = pl.read_parquet(file)
        if points.is_empty():
            continue
        if probe and "best" in points.columns:
            # a probe's point is its own run's best (judged by no SLO), not
            # the cell's: one best row a cell
            points = points.with_columns(pl.lit(False).alias("best"))
        frames.append(points.select(
            pl.lit(series or None, dtype=pl.String).alias("series"),
            pl.lit(x, dtype=pl.String).alias("x"),
            pl.lit(str(folder.relative_to(out))).alias("run"),
            pl.lit(probe).alias("sat_probe"), pl.all()))
    table = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    write_parquet(out / "points.parquet", table)
    return table


def run_all(fn: Callable[..., Any], calls: list[tuple[Any, ...]], labels: list[str], pool: Pool,
            console: Console, folder: Path) -> list[Any]:
    """``fn(*call)`` for every call through ``pool``, in order, showing
    progress: with joblib a bar with the runs in flight and the time left on
    a terminal, one line per run (with the estimate) in a log; submitit jobs
    report through their own logs (``folder/.submitit``)."""
    if pool.launcher != "joblib":
        console.print(f"  {len(calls)} runs through {pool.launcher} ({pool.describe()})")
        return pool.map(fn, calls, folder)
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    jobs = pool.jobs
    results: list[Any] = [None] * len(calls)
    started = time.monotonic()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("", total=len(calls))
        pending = list(range(len(calls)))

        def note(done: int) -> None:
            running = ", ".join(labels[i] for i in pending[:jobs]) or "-"
            bar.update(task, completed=done, description=f"running {running}")
            if not console.is_terminal and pending:
                spent = time.monotonic() - started
                left = f"; about {spent / done * (len(calls) - done):.0f} s left" if done else ""
                console.print(f"  [{done}/{len(calls)} done] running {running}{left}")

        note(0)
        if jobs > 1 and len(calls) > 1:
            from joblib import Parallel, delayed

            # Ctrl-C: the runs hear it, starting workers don't; what joblib's
            # killed workers left of their racks goes after
            with joblib_workers():
                stream = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")(
                    delayed(_indexed)(fn, i, c) for i, c in enumerate(calls))
                for done, (i, result) in enumerate(stream, 1):
                    results[i] = result
                    pending.remove(i)
                    note(done)
        else:
            for done, (i, call) in enumerate(enumerate(calls), 1):
                results[i] = fn(*call)
                pending.remove(i)
                note(done)
    return results


def _indexed(fn: Callable[..., Any], i: int, call: tuple[Any, ...]) -> tuple[int, Any]:
    return i, call_interruptible(fn, *call)


def check_experiment_dir(out: Path, name: str) -> None:
    """Refuse an --out that holds another experiment or a run, before
    anything is written: a second figure would overwrite the first's
    results, plot and checks and leave its runs beside its own."""
    import yaml

    from netkv.results.rundir import RunDirConflict, check_holds

    held = out / "experiment.yaml"
    if held.is_file():
        try:
            data = yaml.safe_load(held.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            data = None
        other = data.get("name") if isinstance(data, dict) else None
        if other != name:
            raise RunDirConflict(f"experiment directory {out} holds experiment {other!r}, not "
                                 f"{name!r}; pass another --out or remove it")
    else:   # a run's or a sweep's folder (the command names --out as the remedy)
        check_holds(out, "experiment")


def write_experiment(out: Path, name: str, exp: Experiment) -> None:
    """``experiment.yaml``: the experiment as it ran (what ``report`` reads)."""
    import yaml

    write_text(out / "experiment.yaml",
               yaml.safe_dump({"name": name, **exp.model_dump(mode="json")}, sort_keys=False))


def report(out: Path) -> Path:
    from netkv.report import report as write_report

    return write_report(out)


def default_out(name: str) -> Path:
    stamp = datetime.now().strftime("%Y-%m-%d/%H-%M-%S")
    return Path("runs") / "reproduce" / name.replace("/", "-") / stamp


def plot(exp: Experiment, table: pl.DataFrame, path: Path, title: str) -> list[Path]:
    """y against x, a line per series, every series visible (its own marker
    and dash), a log y axis where the values span decades (or ``logy``);
    ``path`` (PNG) and beside it SVG and PDF."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from netkv.results.figures import save, spans_decades, style

    fig, ax = plt.subplots(figsize=(8.0, 4.8), dpi=120)
    numeric = all(isinstance(v, (int, float)) for v in exp.x.values)
    positions = list(exp.x.values) if numeric else list(range(len(exp.x.values)))
    every: list[float] = []
    for i, series in enumerate(exp.series):
        ys = []
        for x in exp.x.values:
            rows = table.filter((pl.col("series") == series) & (pl.col("x") == str(x)))
            ys.append(shown(exp.y.metric, float(rows[exp.y.metric][0]))
                      if not rows.is_empty() else math.nan)
        every += ys
        ax.plot(positions, ys, label=series, **style(i))
    if not numeric:
        ax.set_xticks(positions, [str(v) for v in exp.x.values])
    if exp.logy or spans_decades(every):
        ax.set_yscale("log")
    if numeric and min(positions) > 0 and spans_decades(positions):
        ax.set_xscale("log")
    ax.set_xlabel(exp.x.label or exp.x.key)
    ax.set_ylabel(exp.y.label or exp.metrics()[exp.y.metric])
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, path)


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
    if table.is_empty() or "slo_ns" not in table.columns:
        return ""
    bounds = sorted({round(float(v) / 1e3, 3) for v in table["slo_ns"].to_list()})
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
    check_experiment_dir(out, name)
    out.mkdir(parents=True, exist_ok=True)
    write_experiment(out, name, exp)
    from netkv.sim.workload_cache import figure_folder

    started = time.monotonic()
    pool = jobs if isinstance(jobs, Pool) else Pool(jobs)
    # each workload built once for the figure's processes (joblib workers on
    # this machine; submitit jobs may run elsewhere: each builds its own)
    with figure_folder(out) as folder:
        shared = str(folder) if pool.launcher == "joblib" else None
        # a fixed-load figure judges no SLO: nothing to pin
        grid = cells(exp, extra, {} if exp.fixed else pin_slo(exp, extra, out, console, folder))
        console.print(f"{name}: {exp.description} ({len(grid)} runs, {pool.describe()}) "
                      f"-> {out}")
        dirs = [str(out / cell.subdir(exp.x.key)) for cell in grid]
        labels = [f"{cell.series} {exp.x.key}={cell.x}" for cell in grid]
        rows = run_all(run_cell, [(c, d, exp.fixed_load(c.x), tuple(exp.columns),
                                   exp.saturates(c.series), shared)
                                  for c, d in zip(grid, dirs)],
                       labels, pool, console, out)
    warn_unsaturated(rows, console)
    table = pl.DataFrame(rows, infer_schema_length=None)
    write_parquet(out / "results.parquet", table)
    write_points(out, [(c.series, str(c.x), Path(d)) for c, d in zip(grid, dirs)])
    plot(exp, table, out / "plot.png", f"{name}: {exp.description}")
    results = [evaluate(check, table, exp) for check in exp.checks]
    fixed = (f"Every cell: one point at {exp.load_rps:,.0f} req/s offered" if exp.load_rps
             else "Every cell: one point at its x (req/s offered)")
    write_checks(out, exp, results, f"{fixed} (no SLO search).\n" if exp.fixed
                 else slo_markdown(table))
    page = report(out)
    show(exp, table, results, console)
    console.print(f"{name}: {time.monotonic() - started:.0f} s; plot {out / 'plot.png'} "
                  f"(.svg, .pdf), table {out / 'checks.md'}, report {page}")
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
                cells_text.append(f"{shown(exp.y.metric, rows[exp.y.metric][0]):.3g}")
        grid.add_row(series, *cells_text)
    console.print(grid)
    print_checks(results, console)
