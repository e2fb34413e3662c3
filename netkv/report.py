"""``python -m netkv report PATH``: one self-contained HTML page per run,
sweep or experiment (``report.html`` in PATH).

Everything is inline (figures as SVG, the style sheet; no script, font or
image from elsewhere), so the page opens anywhere without a network. It
holds every figure (each also saved as PNG, SVG and PDF), for an experiment
the paper-vs-measured table with the verdicts, the runs' provenance (what
ran, on what) and the noise indicators of every point (how busy the machine
was, what the switch and servers dropped: docs/results.md).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from netkv.results.atomic import write_text
from netkv.results.load import find_runs
from netkv.results.noise import STEAL_WARN

PAGE = "report.html"
FIGURES = "report-figures"
VERDICT_COLOR = {"holds": "#1a7f37", "differs": "#9a6700", "FAIL": "#cf222e"}
NOISE = ("host_busy", "host_steal", "host_load1", "switch_dropped", "switch_malformed",
         "servers_dropped",
         "servers_malformed")
CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#1f2328;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
td,th{border:1px solid #d0d7de;padding:.25em .5em;vertical-align:top}
th{background:#f6f8fa;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0}figure svg{max-width:100%;height:auto}figcaption{font-size:.85em;color:#57606a}
.warn{background:#fff8c5}.verdict{font-weight:600}code{font-size:.9em}
"""


class Raw(str):
    """Markup to put in a table cell as it is (everything else is escaped)."""


def esc(value: Any) -> str:
    return html.escape(str(value))


def fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return "-" if value is None else str(value)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]],
          warn: Iterable[bool] | None = None) -> str:
    flags = list(warn) if warn is not None else None
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for i, row in enumerate(rows):
        cls = ' class="warn"' if flags is not None and flags[i] else ""
        cells = "".join(f'<td class="n">{esc(fmt(c))}</td>' if isinstance(c, (int, float))
                        and not isinstance(c, bool)
                        else f"<td>{c if isinstance(c, Raw) else esc(fmt(c))}</td>" for c in row)
        out.append(f"<tr{cls}>{cells}</tr>")
    return "\n".join(out) + "</table>"


def inline_svg(path: Path, caption: str) -> str:
    """The SVG file's markup, inline (without its XML prolog)."""
    text = path.read_text(encoding="utf-8")
    start = text.find("<svg")
    return (f'<figure data-figure="{esc(path.stem)}">{text[start:]}'
            f"<figcaption>{esc(caption)} (also {esc(path.with_suffix('.pdf').name)}, "
            f"{esc(path.with_suffix('.png').name)})</figcaption></figure>")


# --- provenance and noise ---------------------------------------------------------------------

PROVENANCE_KEYS = (
    ("git commit", lambda p: (p.get("git") or {}).get("commit")),
    ("git dirty", lambda p: (p.get("git") or {}).get("dirty")),
    ("build id", lambda p: (p.get("build") or {}).get("id")),
    ("build type", lambda p: (p.get("build") or {}).get("type")),
    ("compiler", lambda p: (p.get("build") or {}).get("compiler")),
    ("libnetkv.so", lambda p: _file_hash(p, "libnetkv.so")),
    ("kvserver", lambda p: _file_hash(p, "kvserver")),
    ("kvclient", lambda p: _file_hash(p, "kvclient")),
    ("netkv-switch", lambda p: _file_hash(p, "netkv-switch")),
    ("host", lambda p: p.get("host")),
    ("CPU", lambda p: p.get("cpu_model")),
    ("cores (usable)", lambda p: f"{p.get('cores')} ({p.get('usable_cores')})"
     if p.get("cores") else None),
    ("kernel", lambda p: p.get("kernel")),
    ("python / netkv", lambda p: f"{p.get('python')} / {(p.get('versions') or {}).get('netkv')}"),
    ("load before (1/5/15 min)", lambda p: _load(p.get("load_before"))),
    ("load after", lambda p: _load(p.get("load_after"))),
    ("created (UTC)", lambda p: p.get("created_utc")),
)


def _file_hash(prov: dict[str, Any], name: str) -> str | None:
    files = (prov.get("build") or {}).get("files") or {}
    return next((h for f, h in files.items() if Path(f).name == name), None)


def _load(values: Any) -> str | None:
    return " / ".join(f"{v:g}" for v in values) if values else None


def provenance_section(runs: list[Path], root: Path) -> str:
    """One row per provenance field: its value, or every distinct value and
    how many runs had each (a figure measured under two builds shows it)."""
    provs = []
    for run in runs:
        try:
            provs.append(json.loads((run / "provenance.json").read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    if not provs:
        return "<p>No provenance.json found.</p>"
    rows = []
    for label, get in PROVENANCE_KEYS:
        counts: dict[str, int] = {}
        for p in provs:
            value = get(p)
            key = "-" if value is None else str(value)
            counts[key] = counts.get(key, 0) + 1
        if len(counts) == 1:
            rows.append((label, next(iter(counts))))
        elif label.startswith(("load", "created")):
            ordered = sorted(counts)
            rows.append((label, f"{ordered[0]} ... {ordered[-1]} ({len(counts)} values)"))
        else:
            rows.append((label, "; ".join(f"{v} ({n} runs)" for v, n in counts.items())))
    intro = (f"<p>{len(provs)} run(s) under <code>{esc(root)}</code>; each run's "
             "<code>provenance.json</code> has the rest (package versions, the command).</p>")
    return intro + table(("field", "value"), rows)


def noise_section(points: pl.DataFrame, by: list[str]) -> str:
    """Per run (or cell): the busiest the machine was during a point, and
    what the switch and servers dropped over its points. A highlighted row
    is a point set to look at before blaming the protocol."""
    if points.is_empty():
        return "<p>No points.</p>"
    have = [c for c in NOISE if c in points.columns]
    aggs = [pl.len().alias("points"), pl.col("dropped").sum().alias("requests lost")]
    for c in have:
        aggs.append(pl.col(c).max().alias(f"max {c}") if c.startswith("host_")
                    else pl.col(c).sum().alias(c))
    summary = points.group_by(by, maintain_order=True).agg(aggs)
    warn = []
    for row in summary.iter_rows(named=True):
        busy = row.get("max host_busy")
        steal = row.get("max host_steal")
        drops = sum(row.get(c) or 0 for c in NOISE if not c.startswith("host_") and c in row)
        warn.append(bool((busy is not None and busy == busy and busy > 0.9)
                         or (steal is not None and steal == steal and steal > STEAL_WARN)
                         or drops > 0))
    note = ("<p>host_busy: share of the machine's CPU time not idle during a point; "
            "host_steal: share the hypervisor took (a virtual machine's vCPUs ready but "
            "not run); host_load1: the 1-minute load average at its end; switch/servers "
            "columns: what netkv-switch and the kvservers received but dropped or could not "
            f"parse (Mininet and testbed). Highlighted: busy above 90%, steal above "
            f"{100 * STEAL_WARN:.0f}% or any drop.</p>")
    if not any(c.startswith(("switch", "servers")) for c in have):
        note += "<p>No switch or server counters: this target runs no real programs.</p>"
    return note + table(summary.columns, summary.rows(), warn)


# --- experiments -------------------------------------------------------------------------------

def experiment_sections(path: Path) -> tuple[str, list[tuple[str, str]]]:
    import yaml

    from netkv.experiments.spec import Experiment, display, shown

    spec = yaml.safe_load((path / "experiment.yaml").read_text(encoding="utf-8"))
    name = spec.pop("name", path.name)
    exp = Experiment.model_validate(spec)
    results = pl.read_parquet(path / "results.parquet")
    title = f"{name}: {exp.description}"
    sections: list[tuple[str, str]] = []
    # the figure reproduce drew (plot.svg beside plot.png and plot.pdf)
    svg = path / "plot.svg"
    if exp.kind == "timeline":
        caption = "p99 per window over each run (top) and around every change (bottom)"
    else:
        caption = f"{exp.y.label or exp.metrics()[exp.y.metric]} against {exp.x.label or exp.x.key}"
    sections.append(("Figure", inline_svg(svg, caption) if svg.is_file() else
                     "<p>No plot.svg: run <code>reproduce</code> again to draw it.</p>"))

    checks = pl.read_parquet(path / "checks.parquet") if (path / "checks.parquet").is_file() \
        else pl.DataFrame()
    if not checks.is_empty():
        counts = {v: int((checks["verdict"] == v).sum()) for v in VERDICT_COLOR}
        rows = [(r["claim"], r["paper"], r["measured"],
                 Raw(f'<span class="verdict" style="color:{VERDICT_COLOR.get(r["verdict"], "")}">'
                     f'{esc(r["verdict"])}</span>'),
                 "; ".join(x for x in (r["by"], r["why"]) if x))
                for r in checks.iter_rows(named=True)]
        intro = (f"<p>{counts['holds']} of {len(checks)} claims hold as the paper states them; "
                 f"{counts['differs']} differ (declared, with the reason); {counts['FAIL']} fail."
                 f" Source: {esc(exp.paper)}.</p>")
        sections.append(("Paper vs measured", intro + table(
            ("claim", "paper says", "we measured", "verdict", "why it differs"), rows)))
    if exp.kind == "grid":
        metric = exp.y.metric
        unit = display(metric)[1]
        rows = []
        for series in exp.series:
            cells: list[Any] = [series]
            for x in exp.x.values:
                r = results.filter((pl.col("series") == series) & (pl.col("x") == str(x)))
                if r.is_empty():
                    cells.append("missing")
                elif "met" in r.columns and not r["met"][0]:
                    cells.append("none met")
                else:
                    cells.append(shown(metric, float(r[metric][0])))
            rows.append(cells)
        sections.append((f"Measured: {exp.metrics()[metric]}", table(
            ["series", *(f"{exp.x.key}={x}" for x in exp.x.values)], rows)
            + (f"<p>Values in {esc(unit)}.</p>" if unit else "")))
    if exp.notes:
        sections.append(("Notes", "".join(f"<p>{esc(p.strip())}</p>"
                                           for p in exp.notes.split("\n\n") if p.strip())))
    points = pl.read_parquet(path / "points.parquet") if (path / "points.parquet").is_file() \
        else pl.DataFrame()
    if not points.is_empty():
        if "sat_probe" in points.columns:  # past saturation by design: not noise
            points = points.filter(~pl.col("sat_probe"))
        points = points.with_columns(pl.col("series").fill_null("(SLO reference)"),
                                     pl.col("x").fill_null("-"))
    sections.append(("Noise", noise_section(points, ["series", "x"])))
    sections.append(("Provenance", provenance_section(find_runs(path), path)))
    return title, sections


# --- runs and sweeps ---------------------------------------------------------------------------

def runs_figure(points: pl.DataFrame, folder: Path) -> Path:
    """p99 against achieved throughput, one line per run (its search), the
    SLO bound of each; log axes where the values span decades."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from netkv.results.figures import save, spans_decades, style

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    xs: list[float] = []
    ys: list[float] = []
    for i, (run, rows) in enumerate(points.group_by("run", maintain_order=True)):
        rows = rows.filter(pl.col("phase") != "reference").sort("achieved_rps")
        x = (rows["achieved_rps"] / 1e6).to_list()
        y = (rows["p99_ns"] / 1e3).to_list()
        xs += x
        ys += y
        label = rows["name"][0] if rows.height else str(run[0])
        if points["run"].n_unique() > 1:
            label = f"{label} ({Path(str(run[0])).name})"
        ax.plot(x, y, label=label, **style(i))
        slo = rows["slo_ns"].drop_nulls()
        if len(slo) and math.isfinite(float(slo[0])):
            ax.axhline(float(slo[0]) / 1e3, color=f"C{i % 10}", lw=0.8, ls=":")
    if spans_decades(ys):
        ax.set_yscale("log")
    if spans_decades(xs):
        ax.set_xscale("log")
    ax.set_xlabel("achieved throughput (Mreq/s)")
    ax.set_ylabel("p99 latency (us); dotted: the SLO")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    folder.mkdir(exist_ok=True)
    save(fig, folder / "latency-throughput.png")
    return folder / "latency-throughput.svg"


def unfinished_runs(runs: Sequence[Path], path: Path) -> str:
    """The runs whose tables are not written yet, with the points they hold:
    a run writes its tables when it ends, so an interrupted one (or one
    still running) has its finished points only in points.d/, where a rerun
    with the same out= finds them."""
    from netkv.results.rundir import RunDir

    items = []
    for run in runs:
        if (run / "points.parquet").is_file():
            continue
        kept = len(RunDir(run).cached_keys())
        if kept:
            name = str(run.relative_to(path)) if run != path else str(run)
            # a sweep's job resumes with its sweep: given the job's folder as
            # out=, a sweep would nest its jobs below it
            # (nested deeper when an override value holds a "/")
            sweep = next((d for d in run.parents if (d / "multirun.yaml").is_file()), None)
            again = (f"run its sweep again with <code>out={esc(str(sweep))}</code>"
                     if sweep is not None else
                     f"run it again with <code>out={esc(str(run))}</code>")
            items.append(f"<li><code>{esc(name)}</code>: {kept} finished point(s) in "
                         f"<code>points.d/</code>, not in its tables yet (interrupted, or "
                         f"still running; {again} to resume)</li>")
    return f"<ul>{''.join(items)}</ul>" if items else ""


def runs_sections(path: Path) -> tuple[str, list[tuple[str, str]]]:
    from netkv.results.columns import varying
    from netkv.results.load import load

    runs = find_runs(path)
    points = load(path)
    title = f"{'run' if len(runs) == 1 else f'sweep of {len(runs)} runs'}: {path}"
    sections: list[tuple[str, str]] = []
    waiting = unfinished_runs(runs, path)
    if points.is_empty():
        return title, [("Runs", waiting or "<p>No finished point yet.</p>")]
    if waiting:
        sections.append(("Unfinished runs", waiting))
    points = points.with_columns(pl.col("run").map_elements(
        lambda r: str(Path(r).relative_to(path)) or ".", return_dtype=pl.String))
    svg = runs_figure(points, path / FIGURES)
    sections.append(("Figure", inline_svg(svg, "p99 latency against throughput, every load "
                                                "point of every run's search")))
    # the knobs the runs differ in (the reference rows ran the SLO's reference config)
    measured = points.filter(pl.col("phase") != "reference")
    knobs = [c for c in points.columns if "." in c and c != "protocol.name"]
    per_run = [measured.filter(pl.col("run") == r).row(0, named=True)
               for r in measured["run"].unique(maintain_order=True)]
    differ = varying([{k: r.get(k) for k in knobs} for r in per_run])[:8]
    rows = []
    for run in measured["run"].unique(maintain_order=True):
        mine = measured.filter(pl.col("run") == run)
        best = mine.filter(pl.col("best"))
        first = mine.row(0, named=True)
        b = best.row(0, named=True) if not best.is_empty() else None
        rows.append([run, first["protocol"], first["target"], *(first.get(c) for c in differ),
                     b["achieved_rps"] / 1e6 if b else "none met",
                     b["p50_ns"] / 1e3 if b else "-", b["p99_ns"] / 1e3 if b else "-",
                     float(first["slo_ns"]) / 1e3 if first["slo_ns"] is not None else "-"])
    sections.append(("Max throughput under SLO", table(
        ["run", "protocol", "target", *differ, "max Mreq/s", "p50 us", "p99 us", "SLO us"],
        rows)))
    sections.append(("Noise", noise_section(points, ["run"])))
    per_point = points.select([c for c in ("run", "point", "phase", "offered_rps",
                                           "achieved_rps", "completion", *NOISE)
                               if c in points.columns])
    sections.append(("Noise per point", table(per_point.columns, per_point.rows())))
    sections.append(("Provenance", provenance_section(runs, path)))
    return title, sections


def page(title: str, sections: list[tuple[str, str]]) -> str:
    toc = "".join(f'<li><a href="#s{i}">{esc(t)}</a></li>' for i, (t, _) in enumerate(sections))
    body = "".join(f'<section id="s{i}"><h2>{esc(t)}</h2>{h}</section>'
                   for i, (t, h) in enumerate(sections))
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{esc(title)}</h1><ul>{toc}</ul>{body}"
            "<p><small>Written by <code>python -m netkv report</code>; self-contained "
            "(no network needed).</small></p></body></html>\n")


def report(path: Path) -> Path:
    """Write ``report.html`` for the run, sweep or experiment at ``path``."""
    if not path.is_dir():
        raise FileNotFoundError(f"no such run or experiment directory: {path}")
    if (path / "experiment.yaml").is_file():
        title, sections = experiment_sections(path)
    elif find_runs(path):
        title, sections = runs_sections(path)
    else:
        raise FileNotFoundError(f"{path} holds no run (config.yaml) and no experiment "
                                "(experiment.yaml)")
    out = path / PAGE
    write_text(out, page(title, sections))
    return out
