"""A ``kind: timeline`` experiment: p99 per window at a fixed load while the
workload changes (e.g. Pegasus Fig. 13).

1. Search: one ordinary run per series (its overrides plus
   ``timeline.search[series]``, without the x overrides) gives the SLO and
   the max throughput under SLO; in ``<out>/<series>/search/``.
2. Long runs: every cell (series x value) runs ONE point at ``timeline.load``
   x that max, for ``timeline.periods`` x ``workload.dynamics.period_s``, in
   windows of ``timeline.window_ms`` (``runner.execute_at``: stored and
   resumed like any point); in ``<out>/<series>/<x key>=<x>/``.
3. The experiment directory gets ``timeline.parquet`` (one row per window of
   every cell, inside the run: series, x, t_s, window_s, issued, completed,
   lost, p50_ns, p99_ns, slo_ns), ``results.parquet`` (one row per cell: the
   load, the SLO, the change instants, the recovery after each), ``plot.png``
   and ``checks.md``; the checks are computed from timeline.parquet.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from rich.console import Console
from rich.table import Table

from netkv.config.compose import load
from netkv.config.schema import Faults
from netkv.experiments.pool import Pool
from netkv.experiments.checks import (CheckResult, evaluate_timeline, ms_text, print_checks,
                                      recovery_ms, windows_over)
from netkv.experiments.reproduce import (Cell, check_experiment_dir, default_out, pin_slo,
                                         report, run_all, run_cell, scalar, slo_markdown,
                                         write_checks, warn_unsaturated, write_experiment,
                                         write_points)
from netkv.experiments.spec import Check, Experiment, RecoveryCheck, Timeline
from netkv.results.atomic import write_parquet
from netkv.results.columns import knob_columns
from netkv.runner import check_supported

EPS_S = 1e-9


def search_overrides(exp: Experiment, series: str, extra: Sequence[str]) -> tuple[str, ...]:
    """The search run of one series: no x overrides, plus timeline.search."""
    assert exp.timeline is not None
    return (*exp.overrides, *exp.series[series], *exp.timeline.search.get(series, []), *extra)


def run_overrides(exp: Experiment, series: str, x: object, extra: Sequence[str]) -> tuple[str, ...]:
    """The long run of one cell, without its duration (see ``with_duration``)."""
    tl = exp.timeline
    assert tl is not None
    per_value = exp.x.per_value.get(str(x), [])
    at = [f"{exp.x.key}={x}"] if exp.x.override else []
    return (*exp.overrides, *exp.series[series], *at, *per_value,
            *tl.overrides, f"topology.timeline_ms={tl.window_ms:g}", *extra)


def with_duration(overrides: tuple[str, ...], tl: Timeline) -> tuple[str, ...]:
    """Append ``duration`` = periods x the composed config's dynamics period."""
    period = load(list(overrides)).workload.dynamics.period_s
    return (*overrides, f"duration={tl.periods * period:g}")


def change_instants(period_s: float, duration_s: float) -> list[float]:
    """When the simulator changes popularity: every period, before the end."""
    out, k = [], 1
    while k * period_s < duration_s - EPS_S:
        out.append(k * period_s)
        k += 1
    return out


#: results.parquet's list columns (docs/results.md: list[f64])
LIST_COLUMNS = ("changes_s", "faults_s", "recovery_s")


def fault_instants(faults: Faults) -> list[float]:
    """When the run's configured faults strike or end (server crashes and
    restarts, switch stops and restarts), sorted: they end a cold start as a
    popularity change does, so that an outage is not read as one."""
    out = [t for f in (*faults.crashes, *faults.switch_outages)
           for t in (f.at_s, f.restart_s) if t is not None]
    return sorted(set(out))


def run_long(series: str, x: str, overrides: tuple[str, ...], out_dir: str,
             offered_rps: float, slo_ns: float, workloads: str | None = None,
             columns: tuple[str, ...] = ()) -> tuple[dict[str, Any], pl.DataFrame]:
    """One cell's long run (module-level so that joblib workers can call it);
    ``workloads``: the figure's folder of shared workload tables;
    ``columns``: the point's columns the row keeps (``run`` checks)."""
    from netkv.runner import execute_at
    from netkv.sim.workload_cache import WorkloadCache

    cfg = load([*overrides, f"out='{out_dir}'"])
    points = execute_at(cfg, Path(out_dir), ["reproduce", *overrides], Console(file=io.StringIO()),
                        offered_rps, slo_ns, workloads=WorkloadCache(workloads))
    p = points.row(0, named=True)
    window_s = cfg.topology.timeline_ms / 1e3
    raw = pl.read_parquet(Path(out_dir) / "timeline.parquet")
    windows = (
        raw.filter(pl.col("t_s") + window_s <= cfg.duration + EPS_S)
        .select(
            pl.lit(series).alias("series"), pl.lit(x).alias("x"), "t_s",
            pl.lit(window_s).alias("window_s"), "issued", "completed", "lost",
            "p50_ns", "p99_ns", pl.lit(slo_ns).alias("slo_ns"),
        )
    )
    dyn = cfg.workload.dynamics
    changes = change_instants(dyn.period_s, cfg.duration) if dyn.kind != "none" else []
    row = {
        "series": series, "x": x, "run": out_dir, **knob_columns(cfg), "dynamics": dyn.kind,
        "offered_rps": offered_rps, "achieved_rps": p["achieved_rps"],
        "slo_ns": slo_ns, "p50_ns": p["p50_ns"], "p99_ns": p["p99_ns"],
        "completion": p["completion"], "duration_s": cfg.duration, "window_s": window_s,
        "period_s": dyn.period_s, "changes_s": changes,
        "faults_s": fault_instants(cfg.target.faults),
        **{c: scalar(p.get(c)) for c in columns},
    }
    return row, windows


def summarize(row: dict[str, Any], windows: pl.DataFrame, warmup_s: float) -> dict[str, Any]:
    """Add the cell's recovery after each change, after the cold start, and
    its windows above the SLO (from warmup_s on)."""
    if windows.is_empty():
        return {**row, "recovery_s": [], "start_s": math.nan, "windows": 0, "windows_over": 0}
    t_s = windows["t_s"].to_numpy()
    over = windows_over(windows)
    changes = row["changes_s"]
    end = row["duration_s"]
    recs = recovery_ms(t_s, row["window_s"], over, changes, end)
    # the cold start lasts until the first change or fault, whichever is first
    first = min([*changes[:1], *row.get("faults_s", [])[:1], end])
    start = recovery_ms(t_s, row["window_s"], over, [0.0], first)[0]
    later = t_s >= warmup_s - EPS_S
    return {**row, "recovery_s": [r / 1e3 for r in recs], "start_s": start / 1e3,
            "windows": int(later.sum()),
            "windows_over": int(over[later].sum())}


def reproduce_timeline(exp: Experiment, name: str, extra: list[str], out: Path | None,
                       jobs: int | Pool, console: Console) -> list[CheckResult]:
    tl = exp.timeline
    assert tl is not None
    for s in exp.series:  # every config is valid before anything runs
        check_supported(load(list(search_overrides(exp, s, extra))))
        for x in exp.x.values:
            load(list(run_overrides(exp, s, x, extra)))
    out = out or default_out(name)
    check_experiment_dir(out, name)
    out.mkdir(parents=True, exist_ok=True)
    pool = jobs if isinstance(jobs, Pool) else Pool(jobs)
    write_experiment(out, name, exp)
    from netkv.sim.workload_cache import figure_folder

    with figure_folder(out) as folder:
        # the search and the long run share each workload (docs/simulator.md)
        shared = str(folder) if pool.launcher == "joblib" else None
        pinned = [*extra, *pin_slo(exp, extra, out, console, folder)[""]]  # one SLO for all
        return run_timeline(exp, name, extra, out, pool, console, pinned, shared)


def run_timeline(exp: Experiment, name: str, extra: list[str], out: Path, pool: Pool,
                 console: Console, pinned: list[str],
                 shared: str | None) -> list[CheckResult]:
    """reproduce_timeline's searches, long runs, table and checks."""
    tl = exp.timeline
    assert tl is not None
    searches = {s: search_overrides(exp, s, pinned) for s in exp.series}
    longs = {(s, str(x)): with_duration(run_overrides(exp, s, x, pinned), tl)
             for s in exp.series for x in exp.x.values}
    durations = {cell: load(list(o)).duration for cell, o in longs.items()}
    # what the long runs' load is a fraction of: its column, and its name
    base, of = (("sat_tput_rps", "saturated") if tl.saturate
                else ("max_tput_rps", "max under SLO"))
    console.print(f"{name}: {exp.description} ({len(searches)} searches, then {len(longs)} "
                  f"timelines at {tl.load:g} x {of}, {pool.describe()}) -> {out}")
    started = time.monotonic()

    found = run_all(run_cell, [(Cell(s, "search", o), str(out / s / "search"), None, (),
                                tl.saturate, shared) for s, o in searches.items()],
                    [f"{s} search" for s in searches], pool, console, out)
    best = {r["series"]: r for r in found}
    warn_unsaturated(found, console)
    for s, r in best.items():
        console.print(f"  {s}: SLO {r['slo_ns'] / 1e3:.1f} us, max "
                      f"{r['max_tput_rps'] / 1e6:.3f} Mreq/s under SLO"
                      + (f", saturated {r['sat_tput_rps'] / 1e6:.3f}" if tl.saturate else "")
                      + f" -> runs at {tl.load * r[base] / 1e6:.3f} Mreq/s")

    calls = []
    for (s, x), overrides in longs.items():
        rate = tl.load * best[s][base]
        if best[s]["met"] and rate > 0 and math.isfinite(best[s]["slo_ns"]):
            calls.append((s, x, overrides, str(out / s / f"{exp.x.key}={x}"), rate,
                          best[s]["slo_ns"], shared, tuple(exp.columns)))
        else:
            console.print(f"  [red]{s}: no load met the SLO in the search; {x} not run[/red]")
    calls.sort(key=lambda c: -c[4] * durations[(c[0], c[1])])  # longest first
    measured = run_all(run_long, calls, [f"{c[0]} {exp.x.key}={c[1]}" for c in calls], pool,
                       console, out)

    rows, frames = [], []
    for row, windows in measured:
        search = best[row["series"]]
        rows.append(summarize({**row, "search_run": search["run"],
                               "max_tput_rps": search["max_tput_rps"], "load": tl.load,
                               "base_rps": search[base], "base": of},
                              windows, tl.warmup_s))
        frames.append(windows)
    order = {(s, str(x)): i for i, (s, x) in enumerate(longs)}
    rows.sort(key=lambda r: order[(r["series"], r["x"])])
    results = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
    if rows:  # lists that are empty in every row (no change, no fault) infer List(Null)
        results = results.with_columns(pl.col(LIST_COLUMNS).cast(pl.List(pl.Float64)))
    timeline = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    write_parquet(out / "results.parquet", results)
    write_points(out, [*((s, None, out / s / "search") for s in exp.series),
                       *((c[0], c[1], Path(c[3])) for c in calls)])
    write_parquet(out / "timeline.parquet", timeline)
    plot_timeline(exp, results, timeline, out / "plot.png", f"{name}: {exp.description}")
    checks = [evaluate_timeline(c, results, timeline, exp)
              for c in exp.checks if not isinstance(c, Check)]  # spec: no compare here
    write_checks(out, exp, checks, slo_markdown(results) + "\n" + summary_markdown(results))
    page = report(out)
    show_timeline(exp, results, checks, console)
    console.print(f"{name}: {time.monotonic() - started:.0f} s; plot {out / 'plot.png'} "
                  f"(.svg, .pdf), table {out / 'checks.md'}, report {page}")
    return checks


# --- reporting ----------------------------------------------------------------------------


def _ms_list(values: list[float]) -> str:
    return ", ".join(ms_text(v) for v in values) or "-"


def summary_rows(results: pl.DataFrame) -> list[list[str]]:
    out = []
    for r in results.iter_rows(named=True):
        share = r["offered_rps"] / r["base_rps"] if r["base_rps"] else math.nan
        out.append([
            r["series"], r["x"],
            f"{r['offered_rps'] / 1e6:.3f} ({share:.0%} of {r['base']} "
            f"{r['base_rps'] / 1e6:.3f})",
            f"{r['slo_ns'] / 1e3:.1f}", f"{r['p99_ns'] / 1e3:.1f}",
            f"{r['windows_over']}/{r['windows']}",
            _ms_list([c * 1e3 for c in r["changes_s"]]),
            _ms_list([f * 1e3 for f in r.get("faults_s") or []]),
            _ms_list([v * 1e3 for v in r["recovery_s"]]), _ms_list([r["start_s"] * 1e3]),
        ])
    return out


SUMMARY_COLUMNS = ("series", "x", "load Mreq/s", "SLO us", "p99 us (run)",
                   "windows > SLO (after warm-up)", "changes at (ms)", "faults at (ms)",
                   "back under SLO after (ms)", "cold start (ms)")


def summary_markdown(results: pl.DataFrame) -> str:
    lines = ["## Measured", "", "| " + " | ".join(SUMMARY_COLUMNS) + " |",
             "|" + "---|" * len(SUMMARY_COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(results)]
    return "\n".join(lines) + "\n"


def show_timeline(exp: Experiment, results: pl.DataFrame, checks: list[CheckResult],
                  console: Console) -> None:
    grid = Table(title="timeline at a fixed load", title_justify="left")
    for col in SUMMARY_COLUMNS:
        grid.add_column(col, justify="right")
    for row in summary_rows(results):
        grid.add_row(*row)
    console.print(grid)
    print_checks(checks, console)


def plot_timeline(exp: Experiment, results: pl.DataFrame, timeline: pl.DataFrame, path: Path,
                  title: str) -> None:
    """Top: p99 per window over the whole run, per panel (x value), with the
    SLO and the change instants. Bottom: the same around every change
    (time since the change), with the recovery claim's bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from netkv.results.figures import save

    tl = exp.timeline
    assert tl is not None
    panels = list(exp.x.values)
    fig, axes = plt.subplots(2, len(panels), figsize=(5.2 * len(panels), 6.4), dpi=120,
                             squeeze=False)
    colors = {s: f"C{i}" for i, s in enumerate(exp.series)}
    z = {s: 3 + len(exp.series) - i for i, s in enumerate(exp.series)}  # the first on top
    bounds = [c.within_ms for c in exp.checks if isinstance(c, RecoveryCheck)]
    for col, x in enumerate(panels):
        top, zoom = axes[0][col], axes[1][col]
        slo = math.nan
        changes: list[float] = []
        for series in exp.series:
            if timeline.is_empty():
                break
            w = timeline.filter((pl.col("series") == series) & (pl.col("x") == str(x))).sort("t_s")
            if w.is_empty():
                continue
            t, p99 = w["t_s"].to_numpy(), w["p99_ns"].to_numpy() / 1e3
            slo = float(w["slo_ns"][0]) / 1e3
            top.plot(t, p99, lw=0.8, color=colors[series], label=series, drawstyle="steps-post",
                     zorder=z[series])
            row = results.filter((pl.col("series") == series) & (pl.col("x") == str(x)))
            changes = list(row["changes_s"][0]) if not row.is_empty() else []
            for i, c in enumerate(changes):
                sel = (t >= c - 0.05) & (t <= c + 0.3)
                zoom.plot((t[sel] - c) * 1e3, p99[sel], lw=1.0, color=colors[series],
                          alpha=0.8, label=series if i == 0 else None, drawstyle="steps-post",
                          zorder=z[series])
        for ax in (top, zoom):
            if math.isfinite(slo):
                ax.axhline(slo, color="k", ls="--", lw=0.8, label="SLO")
            ys = [v for line in ax.get_lines() for v in np.asarray(line.get_ydata(), float)]
            ys = [v for v in ys if v > 0 and math.isfinite(v)]
            if ys and max(ys) / min(ys) > 10:  # spikes: log; a calm panel stays linear
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
            ax.set_ylabel("p99 per window (us)")
        for c in changes:
            top.axvline(c, color="grey", ls=":", lw=0.8)
        if tl.warmup_s > 0:
            top.axvspan(0, tl.warmup_s, color="grey", alpha=0.12, lw=0)
        zoom.axvline(0, color="grey", ls=":", lw=0.8)
        for b in bounds:
            zoom.axvline(b, color="r", ls="-.", lw=0.8, label=f"{b:g} ms")
        top.set_title(f"{exp.x.label or exp.x.key} = {x}", fontsize=9)
        top.set_xlabel("time (s)")
        zoom.set_xlabel("time since each change (ms)")
        top.legend(fontsize=7)
        zoom.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save(fig, path)
