"""Self-describing datasets (issue #18): every knob a column, a figure's
series recoverable from its points by those columns alone."""

from __future__ import annotations

import io
import re
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from netkv.config.compose import load
from netkv.config.schema import RunConfig
from netkv.experiments.columns import (FIGURE_PHASES, cell_knobs, series_columns,
                                       series_mismatches)
from netkv.experiments.spec import Experiment, available, load_experiment
from netkv.results.columns import SHORTCUTS, config_columns, flatten, knob_columns

TINY = ["servers=4", "keys=1000", "duration=0.02", "slo.max_points=4"]
SHORT = ["protocol", "target", "workload", "alpha", "write_ratio", "keys", "servers", "seed"]


def uncovered(cfg_overrides: list[str], columns: dict) -> list[str]:
    """Config leaves that no column carries (the shortcuts are their groups')."""
    cfg = load(cfg_overrides)
    leaves = flatten(cfg.model_dump(mode="json"))
    return [k for k in leaves if k not in columns and k not in SHORTCUTS and k != "out"
            and not k.endswith(".description")]


@pytest.mark.parametrize("protocol", ["hash", "pegasus", "netcache"])
def test_every_config_key_is_a_column(protocol):
    over = [f"protocol={protocol}"]
    assert uncovered(over, config_columns(load(over))) == []


def test_a_missing_knob_column_is_caught():
    over = ["protocol=pegasus"]
    columns = config_columns(load(over))
    del columns["protocol.selection"], columns["target.faults.loss"]
    assert uncovered(over, columns) == ["protocol.selection", "target.faults.loss"]


def test_runs_that_differ_in_one_key_differ_in_a_column():
    """Every leaf changed alone changes the columns (a knob missing from
    them would make two different runs look identical)."""
    base = load(["protocol=pegasus"])
    ref = knob_columns(base)
    changes = {"target.faults.loss": 0.01, "protocol.selection": "random", "duration": 0.5,
               "topology.server.service_ns": 2000.0, "slo.factor": 4.0, "seed": 7,
               "workload.dynamics.kind": "random", "topology.server.workers": 8}
    for key, value in changes.items():
        data = base.model_dump(mode="json")
        *groups, leaf = key.split(".")
        part = data
        for name in groups:
            part = part[name]
        part[leaf] = value
        cfg = RunConfig.model_validate(data)
        got = knob_columns(cfg)
        assert [k for k in got if got[k] != ref[k]] == [key], key


# --- a figure's series from its points ----------------------------------------------------

PEGASUS = [n for n in available() if n.startswith("pegasus/")]


@pytest.mark.parametrize("name", PEGASUS)
def test_grouping_by_the_series_columns_gives_the_figures_series(name):
    """Each cell's points carry config_columns(cfg) (runner.execute); from
    the composed configs alone, grouping by the series columns gives exactly
    the figure's series, which the short columns of before could not."""
    exp = load_experiment(name)
    knobs = cell_knobs(exp)
    columns = series_columns(exp, knobs)
    frame = pl.DataFrame([{**v, "series": s} for (s, _), v in knobs.items()],
                         infer_schema_length=None)
    assert series_mismatches(frame, columns, list(exp.series)) == []
    if len(exp.series) > 1:
        assert columns, "several series that no column tells apart"


def test_series_mismatches_fail_on_columns_that_do_not_tell_series_apart():
    """Fig. 7's seven series collapsed to three configurations on the old
    columns (protocol, servers, ...)."""
    exp = load_experiment("pegasus/fig7")
    knobs = cell_knobs(exp)
    frame = pl.DataFrame([{**v, "series": s, "protocol": v["protocol.name"]}
                          for (s, _), v in knobs.items()], infer_schema_length=None)
    problems = series_mismatches(frame, ["protocol"], list(exp.series))
    assert any("hash, hash-8core share one configuration" in p for p in problems)
    assert series_mismatches(frame, ["nope"], list(exp.series)) == ["no column nope"]
    split = frame.with_columns(protocol=pl.col("protocol") + pl.col("workload.kind"))
    assert any("spans 2 configurations" in p
               for p in series_mismatches(split, ["protocol"], list(exp.series)))


@pytest.mark.slow
def test_a_reproduced_figures_points_group_into_its_series(tmp_path, monkeypatch):
    """End to end on a tiny grid: <out>/points.parquet grouped by the series
    columns gives the series; the SLO reference row says what it ran."""
    import netkv.experiments.run as run

    exp = Experiment.model_validate({
        "description": "tiny", "overrides": ["protocol=hash", *TINY],
        "x": {"key": "alpha", "values": [0, 1.2], "per_value": {"0": ["workload=uniform"]}},
        "series": {"one": [], "four": ["topology.server.workers=4"],
                   "pegasus": ["protocol=pegasus"]},
    })
    monkeypatch.setattr(run, "load_experiment", lambda name: exp)
    run.reproduce("t/tiny", [], tmp_path, 1, Console(file=io.StringIO()))
    points = pl.read_parquet(tmp_path / "points.parquet")
    figure = points.filter(pl.col("phase").is_in(FIGURE_PHASES["grid"]))
    columns = series_columns(exp, cell_knobs(exp))
    assert "topology.server.workers" in columns and "protocol.name" in columns
    assert series_mismatches(figure, columns, list(exp.series)) == []
    ref = points.filter(pl.col("phase") == "reference").row(0, named=True)
    assert (ref["workload"], ref["alpha"], ref["protocol"]) == ("uniform", 0.0, "hash")
    assert ref["workload.kind"] == "uniform" and ref["series"] is None
    results = pl.read_parquet(tmp_path / "results.parquet")
    assert results["topology.server.workers"].to_list() == [1, 1, 4, 4, 1, 1]


@pytest.mark.slow
def test_a_run_with_loss_differs_from_one_without_in_a_column(tmp_path):
    from netkv.runner import execute

    frames = []
    for i, extra in enumerate([[], ["target.faults.loss=0.01"]]):
        out = tmp_path / str(i)
        cfg = load([*TINY, *extra, f"out={out}"])
        frames.append(execute(cfg, Path(out), ["test"], Console(file=io.StringIO())))
    a, b = (f.row(0, named=True) for f in frames)
    knobs = [k for k in a if "." in k and a[k] != b.get(k)]
    assert knobs == ["target.faults.loss"]
    assert frames[1]["target.faults.loss"].unique().to_list() == [0.01]


# --- one schema, one unit convention: docs/results.md against the files --------------------

DOCS = Path(__file__).resolve().parents[1] / "docs" / "results.md"
TYPES = {"str": pl.String, "f64": pl.Float64, "i64": pl.Int64, "i32": pl.Int32,
         "bool": pl.Boolean, "list[f64]": pl.List(pl.Float64)}
# a unit other than the SI base units the names promise (_ns, _s, _rps, _bytes)
NOT_SI = ("_us", "_ms", "_mrps", "_krps", "_kb", "_mb", "_gb", "_kbytes")


def documented() -> dict[str, dict[str, str]]:
    """Heading (without backticks) -> column -> type, from every
    ``| column | type | meaning |`` table of docs/results.md."""
    out: dict[str, dict[str, str]] = {}
    heading, rows = "", None
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading, rows = line.lstrip("#").strip().replace("`", ""), None
        elif line.startswith("| column | type |"):
            rows = out.setdefault(heading, {})
        elif rows is not None and line.startswith("| `"):
            names, kind, meaning = line.split("|")[1:4]
            if meaning.strip().startswith("only with"):
                continue   # optional columns (e.g. repeat=N): not in every file
            kinds = [k.strip() for k in kind.split(",")]
            for i, name in enumerate(names.split(",")):
                rows[name.strip().strip("`")] = kinds[min(i, len(kinds) - 1)]
        elif not line.startswith("|"):
            rows = None
    return out


def schema_problems(frame: pl.DataFrame, schema: dict[str, str],
                    extra: set[str] = frozenset()) -> list[str]:
    """How ``frame`` differs from a documented table: a documented column
    missing or of another type, an undocumented column (``extra``: config
    columns), a measured column named in a unit other than the SI base units."""
    # `refused.switch.<reason>`: a family of columns, each of that type
    families = {re.compile(re.escape(c.split("<")[0]) + r"[\w.]+$"): t
                for c, t in schema.items() if "<" in c}
    problems = [f"missing column {c}" for c in schema if c not in frame.columns and "<" not in c]
    for name, dtype in frame.schema.items():
        kind = schema.get(name) or next((t for rx, t in families.items() if rx.match(name)), None)
        if kind is not None:
            if dtype != TYPES[kind] and dtype != pl.Null:
                problems.append(f"column {name}: {dtype}, documented {kind}")
        elif name not in extra:
            problems.append(f"undocumented column {name}")
        if name not in extra and name.endswith(NOT_SI):
            problems.append(f"column {name}: not an SI base unit (_ns, _s, _rps, _bytes)")
    return problems


def test_the_schema_check_fails_on_wrong_data():
    schema = documented()["points.parquet"]
    frame = pl.DataFrame({"point": ["a"], "p99_us": [1.0], "issued": [1.5]})
    problems = schema_problems(frame, {**schema, "p99_us": "f64"})
    assert "missing column offered_rps" in problems
    assert "column issued: Float64, documented i64" in problems
    assert "column p99_us: not an SI base unit (_ns, _s, _rps, _bytes)" in problems
    assert "undocumented column zzz" in schema_problems(frame.with_columns(zzz=1), schema)
    bad = frame.with_columns(pl.lit(0.5).alias("refused.switch.x"))
    assert "column refused.switch.x: Float64, documented i64" in schema_problems(bad, schema)
    assert documented()["histograms.parquet"] == {"point": "str", "lower_ns": "f64",
                                                 "count": "i64"}


@pytest.mark.slow
def test_every_table_matches_docs_results_md(tmp_path, monkeypatch):
    """A run's and a grid and timeline experiment's tables, against the
    documented columns, types and units; histograms without empty rows;
    every file readable by the group."""
    import netkv.experiments.run as run
    from netkv.experiments.spec import Experiment

    docs = documented()
    cfg_cols = set(config_columns(load(["protocol=pegasus"])))
    run_dir = tmp_path / "run"
    from netkv.runner import execute

    execute(load([*TINY, f"out={run_dir}"]), run_dir, ["test"], Console(file=io.StringIO()))
    for table in ("points", "servers", "timeline", "histograms"):
        frame = pl.read_parquet(run_dir / f"{table}.parquet")
        extra = set(config_columns(load(TINY))) if table == "points" else set()
        assert schema_problems(frame, docs[f"{table}.parquet"], extra) == [], table
    hist = pl.read_parquet(run_dir / "histograms.parquet")
    assert len(hist) and hist["count"].min() > 0

    grid = Experiment.model_validate({
        "description": "tiny", "overrides": ["protocol=hash", *TINY],
        "x": {"key": "alpha", "values": [0.99]}, "series": {"a": [], "b": ["protocol=pegasus"]},
        "checks": [{"claim": "c", "left": {"series": "b", "x": 0.99}, "op": ">=",
                    "right": {"series": "a", "x": 0.99, "times": 0.1}}]})
    timeline = Experiment.model_validate({
        "kind": "timeline", "description": "tiny",
        "overrides": ["protocol=hash", *TINY, "workload.dynamics.period_s=0.03"],
        "x": {"key": "workload.dynamics.kind", "values": ["random"]}, "series": {"hash": []},
        # the long run at half the saturated throughput (timeline.saturate)
        "timeline": {"load": 0.5, "saturate": True, "periods": 2, "window_ms": 10},
        "checks": [{"kind": "no_violation", "claim": "n", "series": "hash", "x": "all",
                    "allowed_windows": 1000}]})
    for kind, exp in (("grid", grid), ("timeline", timeline)):
        out = tmp_path / kind
        monkeypatch.setattr(run, "load_experiment", lambda name, exp=exp: exp)
        run.reproduce("t/tiny", [], out, 1, Console(file=io.StringIO()))
        results = pl.read_parquet(out / "results.parquet")
        assert schema_problems(results, docs[f"Experiment results.parquet ({kind})"],
                               cfg_cols) == [], kind
        points = pl.read_parquet(out / "points.parquet")
        assert schema_problems(points, {**docs["points.parquet"],
                                        **docs["Experiment points.parquet"]}, cfg_cols) == []
        checks = pl.read_parquet(out / "checks.parquet")
        assert schema_problems(checks, docs["Experiment checks.parquet"]) == []
        if kind == "timeline":
            row = results.row(0, named=True)
            assert row["base"] == "saturated" and row["base_rps"] > row["max_tput_rps"]
            assert row["offered_rps"] == pytest.approx(0.5 * row["base_rps"])
            windows = pl.read_parquet(out / "timeline.parquet")
            assert schema_problems(windows, docs["Experiment timeline.parquet"]) == []
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert path.stat().st_mode & 0o040, f"{path} is not readable by the group"


# --- noise per point --------------------------------------------------------------------------

def test_noise_counts_what_the_switch_and_servers_dropped():
    from netkv.results.noise import busy_fraction, server_noise, switch_noise

    before = {"frames": 100, "pipe_drop": 1, "fault_loss": 0, "p0.rx_ring_drop": 0,
              "bad_frames": 0, "bad_msgs": 0}
    after = {"frames": 1100, "pipe_drop": 4, "fault_loss": 10, "p0.rx_ring_drop": 2,
             "p1.rx_ring_drop": 1, "bad_frames": 1, "bad_msgs": 2}
    assert switch_noise(before, after) == {"switch_rx": 1000, "switch_dropped": 3 + 10 + 2 + 1,
                                           "switch_malformed": 3}
    assert switch_noise({}, {"packet_in": 3}) == {}   # a back-end without these counters
    servers = server_noise([{"rx": 5, "bad": 0}, {"rx": 0, "bad": 1, "send_err": 0}],
                           [{"rx": 505, "bad": 2}, {"rx": 300, "bad": 1, "send_err": 4}])
    assert servers == {"servers_rx": 800, "servers_dropped": 4, "servers_malformed": 2}
    assert busy_fraction((10, 100), (40, 200)) == pytest.approx(0.3)
    assert busy_fraction((10, 100), (10, 100)) != busy_fraction((10, 100), (10, 100))  # NaN


# --- run directories never collide -------------------------------------------------------------

def test_the_default_run_directory_is_claimed_exclusively(tmp_path, monkeypatch):
    from netkv.cli import claim_out, unique_dir

    base = tmp_path / "runs" / "12-00-00-hash-sim"
    assert unique_dir(base) == base and base.is_dir()
    assert unique_dir(base).name == "12-00-00-hash-sim-2"   # taken: the next free one
    assert unique_dir(base).name == "12-00-00-hash-sim-3"
    monkeypatch.chdir(tmp_path)
    claimed = claim_out(["servers=4"], False)[-1]
    assert claimed.startswith("out='runs/") and (tmp_path / claimed[5:-1]).is_dir()
    assert claim_out(["out=x"], False) == ["out=x"]   # the user's choice is theirs


@pytest.mark.slow
def test_eight_runs_started_at_once_write_eight_complete_directories(tmp_path):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "netkv", "run", "servers=2", "keys=100", "duration=0.01",
           "slo.max_points=2"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errors
    runs = sorted(p.parent for p in (tmp_path / "runs").rglob("config.yaml")
                  if "points.d" not in p.parts)
    assert len(runs) == 8, runs
    for run in runs:
        points = pl.read_parquet(run / "points.parquet")
        assert points.filter(pl.col("phase") != "reference").height >= 2, run
        assert len(list((run / "points.d").iterdir())) == points.height
