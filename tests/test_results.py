"""Run directories: atomic writes, point fragments, resume, loading many runs."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from netkv.results import load
from netkv.results.atomic import write_parquet, write_text
from netkv.results.rundir import RunDir, RunDirConflict, point_key
from netkv.targets.base import PointResult


def make_result(rate: float, p99: float = 40_000.0) -> PointResult:
    return PointResult(
        offered_rps=rate, duration_s=0.5, issued=1000, completed=990, dropped=10, timeouts=0,
        latency_ns={"mean": 9e3, "p50": 8e3, "p90": 2e4, "p99": p99, "p999": 9e4},
        server_requests=np.array([500, 300, 190], dtype=np.int64),
        hist_lower_ns=np.array([1000.0, 1010.0]), hist_counts=np.array([600, 390]),
        timeline={"t_s": np.array([0.0, 0.25]), "completed": np.array([495, 495])},
    )


def test_atomic_write_keeps_old_file_when_writer_fails(tmp_path):
    target = tmp_path / "t.parquet"
    write_parquet(target, pl.DataFrame({"a": [1]}))

    def broken(tmp):
        tmp.write_bytes(b"half a parquet")
        raise KeyboardInterrupt

    from netkv.results.atomic import write_with

    with pytest.raises(KeyboardInterrupt):
        write_with(target, broken)
    assert pl.read_parquet(target)["a"].to_list() == [1]
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_point_round_trip_and_tables(tmp_path):
    run = RunDir(tmp_path / "run")
    assert run.prepare("a: 1\n", {"seed": 1}) == 0
    keys = []
    for i, rate in enumerate((1e5, 2e5)):
        key = point_key(rate, i)
        keys.append(key)
        run.store_point(key, "search", make_result(rate), {"protocol": "hash"})
    back = run.load_point(keys[1])
    assert back is not None
    assert back.offered_rps == 2e5 and back.completed == 990
    assert back.latency_ns["p99"] == 40_000.0
    np.testing.assert_array_equal(back.server_requests, [500, 300, 190])
    points = run.finalize_tables(5e4, {keys[0]: True, keys[1]: False}, keys[0], keys)
    assert points["slo_met"].to_list() == [True, False]
    assert points["best"].to_list() == [True, False]
    assert points["max_server_share"][0] == pytest.approx(500 / 990)
    servers = pl.read_parquet(tmp_path / "run" / "servers.parquet")
    assert servers.height == 6
    assert load(tmp_path).height == 2


def test_balance_columns_are_nan_when_no_server_served(tmp_path):
    """The switch answered every request: a ratio of loads is undefined,
    and 0.0 (the old value) read as the worst balance in min_over_max but
    the best in imbalance."""
    run = RunDir(tmp_path / "run")
    run.prepare("a: 1\n", {"seed": 1})
    served = make_result(1e5)
    idle = make_result(2e5)
    idle.server_requests = np.zeros(3, dtype=np.int64)
    keys = [point_key(1e5, 0), point_key(2e5, 1)]
    run.store_point(keys[0], "search", served, {})
    run.store_point(keys[1], "search", idle, {})
    points = run.finalize_tables(5e4, {k: True for k in keys}, keys[0], keys)
    balance = ("max_server_share", "max_over_mean", "min_over_max", "imbalance")
    assert points.row(0, named=True)["min_over_max"] == pytest.approx(190 / 500)
    assert points.row(0, named=True)["max_over_mean"] == pytest.approx(500 / (990 / 3))
    assert all(np.isnan(points.row(1, named=True)[c]) for c in balance)


def test_unfinished_fragment_is_not_a_point(tmp_path):
    run = RunDir(tmp_path)
    run.prepare("a: 1\n", {})
    key = point_key(1e5, 3)
    half = tmp_path / "points.d" / key
    half.mkdir(parents=True)
    (half / "servers.parquet").write_bytes(b"junk from a killed run")
    assert run.cached_keys() == set()
    assert run.load_point(key) is None
    run.store_point(key, "search", make_result(1e5), {})
    assert run.cached_keys() == {key}


def test_reopening_with_other_config_is_refused(tmp_path):
    RunDir(tmp_path).prepare("alpha: 1.0\n", {})
    with pytest.raises(RunDirConflict, match="different config"):
        RunDir(tmp_path).prepare("alpha: 1.2\n", {})
    assert RunDir(tmp_path).prepare("alpha: 1.0\n", {}) == 0


def test_a_refused_run_directory_names_what_differs(tmp_path):
    """The refusal said only "a different config": a user resuming with one
    knob forgotten could not tell which."""
    held = "protocol:\n  name: pegasus\nalpha: 1.2\nduration: 2.0\nseed: 1\nkeys: 10\n"
    RunDir(tmp_path).prepare(held, {})
    with pytest.raises(RunDirConflict) as err:
        RunDir(tmp_path).prepare(held.replace("2.0", "0.2").replace("pegasus", "hash"), {})
    assert "different config (protocol.name: \"pegasus\" -> \"hash\", duration: 2.0 -> 0.2)" \
        in str(err.value), err.value
    many = "protocol:\n  name: hash\nalpha: 1\nduration: 0.2\nkeys: 10\nrepeat: 2\n"
    with pytest.raises(RunDirConflict) as err:   # 1 is not 1.0; seed gone, repeat new
        RunDir(tmp_path).prepare(many, {})
    assert ("(protocol.name: \"pegasus\" -> \"hash\", alpha: 1.2 -> 1, duration: 2.0 -> 0.2, "
            "and 2 more)") in str(err.value), err.value
    assert RunDir(tmp_path).prepare(held, {}) == 0


def test_an_interrupted_run_resumes_with_the_out_its_line_names(tmp_path, monkeypatch, capsys):
    """A run netkv placed (no out=) records out as runs/...; interrupted,
    it says "run again with out=<absolute path>", which was refused as a
    different config. The path is no part of what was measured."""
    from netkv.cli import main

    monkeypatch.chdir(tmp_path)
    tiny = ["servers=2", "keys=1000", "duration=0.02", "slo.max_points=3"]
    assert main(["run", *tiny, "out=runs/x"]) == 0
    for out in (tmp_path / "runs" / "x", "./runs/x/"):
        assert main(["run", *tiny, f"out={out}"]) == 0, capsys.readouterr().err
        prov = json.loads((tmp_path / "runs" / "x" / "provenance.json").read_text())
        assert prov["resumed_points"] > 0
    assert main(["run", *tiny, "seed=2", f"out={tmp_path / 'runs' / 'x'}"]) == 2
    assert "(seed: 1 -> 2)" in capsys.readouterr().err   # what was measured still counts


def test_load_many_runs_adds_run_column(tmp_path):
    for name, rate in (("a", 1e5), ("b", 3e5)):
        run = RunDir(tmp_path / name)
        run.prepare(f"name: {name}\n", {})
        key = point_key(rate, 0)
        run.store_point(key, "search", make_result(rate), {"name": name})
        run.finalize_tables(1e5, {key: True}, key, [key])
    frame = load(tmp_path / "a", tmp_path / "b")
    assert sorted(frame["name"].to_list()) == ["a", "b"]
    assert frame["run"].n_unique() == 2
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing")


def test_write_text_is_atomic_and_complete(tmp_path):
    write_text(tmp_path / "x.yaml", "a: 1\n")
    assert (tmp_path / "x.yaml").read_text() == "a: 1\n"


def test_config_differences_of_a_hand_edited_date() -> None:
    """YAML reads an unquoted 2026-01-01 as a date, which json.dumps
    refused: the one-line refusal became a traceback."""
    from netkv.results.rundir import config_differences

    assert config_differences("note: 2026-01-01\n", "note: x\n") == 'note: "2026-01-01" -> "x"'


def test_a_probe_at_the_unloaded_load_is_one_row(tmp_path):
    """slo.unloaded_fraction=0.25: the search's first probe (a quarter of
    the capacity hint) is the unloaded point's load and seed, so it reuses
    that measurement; its key was listed twice, and every table held the
    point twice (points, servers, histograms: counts and sums doubled)."""
    import polars as pl

    from netkv.cli import main

    out = tmp_path / "r"
    assert main(["run", "servers=4", "keys=20000", "duration=0.02", "slo.max_points=4",
                 "slo.unloaded_fraction=0.25", f"out={out}"]) == 0
    points = pl.read_parquet(out / "points.parquet")
    assert points["point"].is_unique().all(), points.select("point", "phase")
    unloaded = points.filter(pl.col("phase") == "unloaded")
    assert len(unloaded) == 1
    for table in ("servers", "histograms"):
        frame = pl.read_parquet(out / f"{table}.parquet")
        assert frame.filter(pl.col("point") == unloaded["point"][0]).is_duplicated().sum() == 0
