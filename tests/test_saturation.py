"""netkv.experiments.saturation: the saturated throughput searched at
saturation, on a fake point whose mix worsens past a load (as StarCache's
loop overflows), so the fluid bound of a lower point overstates it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from netkv.config.compose import load
from netkv.experiments import saturation


def fake_points(true_sat: float, calls: list[float]) -> Any:
    def execute_at(cfg: Any, out: Path, argv: list[str], console: Any, load_rps: float,
                   slo_ns: float, workloads: Any = None) -> pl.DataFrame:
        calls.append(load_rps)
        # below true_sat the busiest server is under capacity: its bound is
        # above the load; past it the mix worsens and the bound falls below
        bound = true_sat * 1.05 if load_rps <= true_sat else true_sat * 0.9
        # a column that tells the probes apart (as overflow or balance would)
        return pl.DataFrame([{"sat_tput_rps": bound, "completion": 1.0,
                              "offered_rps": load_rps, "achieved_rps": load_rps,
                              "min_over_max": load_rps / 1e7}])
    return execute_at


def test_bisects_to_the_load_whose_own_mix_saturates(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    calls: list[float] = []
    monkeypatch.setattr("netkv.runner.execute_at", fake_points(7.4e6, calls))
    sat, probes, row = saturation.saturation_rps(load([]), tmp_path, [], 4.0e6, 8.1e6)
    assert calls[0] == 8.1e6 and probes == len(calls) <= saturation.MAX_PROBES
    assert 7.0e6 <= sat <= 7.4e6, sat  # never above the true saturation
    # the point measured there, not the last probe (which may have failed)
    assert row is not None and row["offered_rps"] == sat != calls[-1]


def test_no_sustainable_probe_leaves_the_floor(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    calls: list[float] = []
    monkeypatch.setattr("netkv.runner.execute_at", fake_points(3.9e6, calls))
    sat, probes, row = saturation.saturation_rps(load([]), tmp_path, [], 4.0e6, 8.1e6)
    assert (sat, row) == (4.0e6, None) and probes == saturation.MAX_PROBES


def test_a_stable_mix_keeps_the_fluid_bound(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    calls: list[float] = []
    monkeypatch.setattr("netkv.runner.execute_at", fake_points(9.0e6, calls))
    sat, probes, row = saturation.saturation_rps(load([]), tmp_path, [], 4.0e6, 8.1e6)
    assert (sat, probes) == (8.1e6, 1) and row is not None and row["offered_rps"] == 8.1e6


def cell_row(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, true_sat: float,
             met: bool = True) -> dict[str, Any]:
    """reproduce.run_cell of a saturating cell whose SLO search's best point
    is at 4 M (fluid bound 8.1 M), its probes from fake_points."""
    from netkv.experiments.reproduce import Cell, run_cell

    best = {"best": True, "offered_rps": 4.0e6, "achieved_rps": 4.0e6, "p50_ns": 1e4,
            "p99_ns": 4e4, "max_over_mean": 1.1, "max_server_share": 0.03,
            "min_over_max": 0.4, "imbalance": 0.1, "sat_tput_rps": 8.1e6,
            "sat_bottleneck": "servers", "slo_ns": 5e4, "completion": 1.0,
            "overflow_ratio": 0.0}
    monkeypatch.setattr("netkv.runner.execute",
                        lambda *a, **k: pl.DataFrame([{**best, "best": met}]))
    monkeypatch.setattr("netkv.runner.execute_at", fake_points(true_sat, []))
    return run_cell(Cell("s", 0.99, ()), str(tmp_path), None, ("overflow_ratio",), True)


def test_a_cell_keeps_what_it_measured_at_saturation(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    row = cell_row(monkeypatch, tmp_path, 7.4e6)
    assert row["min_over_max"] == 0.4  # at the SLO's best point
    assert row["min_over_max_at_sat"] == pytest.approx(row["sat_tput_rps"] / 1e7)
    assert row["achieved_rps_at_sat"] == row["sat_tput_rps"]
    # a column the probes lack is missing there (NaN: a check on it fails)
    assert math.isnan(row["overflow_ratio_at_sat"])
    # no probe sustainable: the best point is the saturated one
    row = cell_row(monkeypatch, tmp_path, 3.9e6)
    assert row["sat_tput_rps"] == 4.0e6 and row["min_over_max_at_sat"] == 0.4
    assert row["overflow_ratio_at_sat"] == 0.0
    # nothing met the SLO: nothing at saturation either
    row = cell_row(monkeypatch, tmp_path, 7.4e6, met=False)
    assert math.isnan(row["min_over_max_at_sat"]) and row["sat_probes"] == 0


def test_metrics_at_saturation_only_where_a_series_saturates() -> None:
    from pydantic import ValidationError

    from netkv.experiments.spec import Experiment

    base = {"description": "t", "x": {"key": "alpha", "values": [0.99]},
            "series": {"hash": ["protocol=hash"], "starcache": ["protocol=starcache"]},
            "columns": {"overflow_ratio": "overflow"}}
    exp = Experiment.model_validate({**base, "saturate": True,
                                     "y": {"metric": "overflow_ratio_at_sat"}})
    assert exp.metrics()["min_over_max_at_sat"] == ("balancing efficiency: least / most "
                                                    "loaded server, at saturation")
    with pytest.raises(ValidationError, match="columns: x_at_sat \\(allowed: names not"):
        Experiment.model_validate({**base, "columns": {"x_at_sat": "x"}})
    with pytest.raises(ValidationError, match="y.metric: 'min_over_max_at_sat'"):
        Experiment.model_validate({**base, "y": {"metric": "min_over_max_at_sat"}})
    with pytest.raises(ValidationError, match="series hash does not search"):
        Experiment.model_validate({**base, "saturate": ["starcache"],
                                   "y": {"metric": "min_over_max_at_sat"}})
    check = {"claim": "c", "left": {"series": "hash", "x": 0.99,
                                    "metric": "min_over_max_at_sat"},
             "op": ">=", "right": {"value": 0.8}}
    with pytest.raises(ValidationError, match="check 'c': 'min_over_max_at_sat'.*hash"):
        Experiment.model_validate({**base, "saturate": ["starcache"], "checks": [check]})


def test_unanswered_requests_are_not_sustainable() -> None:
    assert saturation.sustainable(1e6, 1.1e6, 1.0, 0.99, 0.02)
    assert not saturation.sustainable(1e6, 1.1e6, 0.9, 0.99, 0.02)
    assert not saturation.sustainable(1e6, 0.9e6, 1.0, 0.99, 0.02)


def test_saturate_names_series_or_all() -> None:
    from netkv.experiments.spec import load_experiment

    exp = load_experiment("starcache/fig9")
    assert exp.saturates("starcache") and not exp.saturates("nocache")
    assert exp.model_copy(update={"saturate": True}).saturates("nocache")
    assert not exp.model_copy(update={"saturate": False}).saturates("starcache")


def test_saturate_names_series_of_a_searching_grid() -> None:
    import pytest
    from pydantic import ValidationError

    from netkv.experiments.spec import Experiment

    base = {"description": "t", "x": {"key": "alpha", "values": [0, 0.99]},
            "series": {"hash": ["protocol=hash"], "starcache": ["protocol=starcache"]}}
    assert Experiment.model_validate({**base, "saturate": ["starcache"]}).saturates("starcache")
    assert not Experiment.model_validate({**base, "saturate": ["starcache"]}).saturates("hash")
    with pytest.raises(ValidationError, match="saturate: series 'starcach'"):
        Experiment.model_validate({**base, "saturate": ["starcach"]})
    with pytest.raises(ValidationError, match="saturate: measured after an SLO search"):
        Experiment.model_validate({**base, "saturate": True, "load_rps": 1e6})


def test_a_cell_without_a_fluid_bound_is_named() -> None:
    """A target without server capacities gives no fluid bound: the cell's
    'saturated' throughput is its best point's, and a line says so (it did
    not); a cell with a bound, or one where nothing met, says nothing."""
    import io
    import math

    from rich.console import Console

    from netkv.experiments.reproduce import warn_unsaturated

    out = io.StringIO()
    warn_unsaturated([
        {"series": "a", "x": "1", "met": True, "sat_fluid_rps": math.nan},
        {"series": "b", "x": "2", "met": True, "sat_fluid_rps": 4e6},
        {"series": "c", "x": "3", "met": False, "sat_fluid_rps": math.nan},
        {"series": "d", "x": "4", "met": True},   # not saturating
    ], Console(file=out, width=200))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("  a 1: no fluid bound"), lines


def test_the_served_rate_of_an_overloaded_point_stays_at_capacity():
    """achieved_rps was completed / duration, completions in the drain
    included: at 3 x the rack's capacity a 50 ms point "served" 1.6 M req/s
    on a rack of 0.8 M (its backlog drained after the arrivals). Only the
    completions while the load ran count now; the rest are completed_late."""
    from netkv.config.compose import load
    from netkv.targets.sim import SimTarget

    cfg = load(["protocol=hash", "servers=4", "keys=20000", "workload=uniform",
                "duration=0.05"])
    with SimTarget(cfg) as target:
        cap = target.capacity_hint_rps()
        over = target.run_point(3 * cap, 1)
        under = target.run_point(0.5 * cap, 1)
    assert over.completed_late > 0.1 * over.completed
    assert over.achieved_rps <= 1.02 * cap, (over.achieved_rps, cap)
    assert over.achieved_rps >= 0.9 * cap
    # a point the rack keeps up with: its served rate is its offered load
    assert under.achieved_rps == pytest.approx(0.5 * cap, rel=0.02)
    assert under.completed_late < 0.001 * under.completed


def test_the_experiments_points_hold_every_saturation_probe(tmp_path: Path) -> None:
    """Experiment points.parquet: a cell's points, then its probes'
    (<cell>/sat-<i>/, by i, under the cell's labels, sat_probe true), then
    the SLO reference's. The probes were left out."""
    from netkv.experiments.reproduce import SLO_DIR, write_points

    def run(folder: Path, phase: str, offered: float) -> None:
        folder.mkdir(parents=True)
        pl.DataFrame({"phase": [phase], "offered_rps": [offered], "best": [True]}).write_parquet(
            folder / "points.parquet")

    cell = tmp_path / "s" / "alpha=1"
    run(cell, "search", 1.0)
    for i in (10, 2, 0, 1):  # sat-10 after sat-2: by i, not by name
        run(cell / f"sat-{i}", "fixed", 100.0 + i)
    (cell / "sat-x").mkdir()   # not a probe
    run(tmp_path / SLO_DIR, "reference", 0.5)
    table = write_points(tmp_path, [("s", "1", cell)])
    # a probe is its own run's best point, not the cell's: one best row a cell
    assert table.select("series", "x", "run", "sat_probe", "offered_rps", "best").rows() == [
        ("s", "1", "s/alpha=1", False, 1.0, True),
        *(("s", "1", f"s/alpha=1/sat-{i}", True, 100.0 + i, False) for i in (0, 1, 2, 10)),
        (None, None, SLO_DIR, False, 0.5, True)]
    assert pl.read_parquet(tmp_path / "points.parquet").equals(table)
