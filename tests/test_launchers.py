"""Sweeps beyond one machine (issue #13): a ``-m`` sweep through Hydra's
submitit launcher and ``reproduce --launcher submitit_local`` give the same
datasets as the joblib path, and resume like it (finished points are not
recomputed). submitit_local runs each job as its own process here; Slurm
takes the same path with ``submitit_slurm``."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from netkv.config.compose import ConfigError
from netkv.experiments.pool import Pool
from netkv.results.noise import COLUMNS as NOISE

SWEEP = ["-m", "protocol=hash,pegasus", "servers=4", "keys=2000", "duration=0.01"]
TABLES = ("points", "servers", "timeline", "histograms")


def same_tables(a: Path, b: Path) -> int:
    """Every run directory below ``a`` has the same tables as its twin below
    ``b``; the number of run directories compared."""
    runs = sorted(p.parent.relative_to(a) for p in a.rglob("points.parquet")
                  if "points.d" not in p.parts and "slo-reference" not in p.parts
                  and (p.parent / "config.yaml").is_file())   # not the experiment's own
    for run in runs:
        for table in TABLES:
            # the noise columns measure the machine at that moment, not the run
            left = pl.read_parquet(a / run / f"{table}.parquet").drop(NOISE, strict=False)
            right = pl.read_parquet(b / run / f"{table}.parquet").drop(NOISE, strict=False)
            assert left.equals(right), (run, table)
    return len(runs)


def test_a_sweep_through_submitit_local_gives_the_joblib_dataset(tmp_path: Path) -> None:
    from netkv.cli import main

    assert main(["run", *SWEEP, f"out={tmp_path / 'joblib'}"]) == 0
    assert main(["run", *SWEEP, f"out={tmp_path / 'submitit'}",
                 "hydra/launcher=submitit_local"]) == 0
    assert same_tables(tmp_path / "joblib", tmp_path / "submitit") == 2


def tiny(monkeypatch):
    import netkv.experiments.run as run
    from netkv.experiments.spec import Experiment

    exp = Experiment.model_validate({
        "description": "tiny", "overrides": ["servers=4", "keys=2000", "duration=0.01",
                                             "slo.max_points=4"],
        "x": {"key": "alpha", "values": [0.0, 1.2]},
        "series": {"hash": ["protocol=hash"], "pegasus": ["protocol=pegasus"]},
    })
    monkeypatch.setattr(run, "load_experiment", lambda name: exp)
    return run


def test_reproduce_through_submitit_local_gives_the_joblib_dataset_and_resumes(
        tmp_path: Path, monkeypatch) -> None:
    run = tiny(monkeypatch)
    quiet = Console(file=None, quiet=True)
    run.reproduce("t/tiny", [], tmp_path / "joblib", Pool(2), quiet)
    run.reproduce("t/tiny", [], tmp_path / "submitit", Pool(2, "submitit_local"), quiet)
    assert same_tables(tmp_path / "joblib", tmp_path / "submitit") == 4
    left = pl.read_parquet(tmp_path / "joblib" / "results.parquet").drop("run")
    right = pl.read_parquet(tmp_path / "submitit" / "results.parquet").drop("run")
    assert left.equals(right)
    assert list((tmp_path / "submitit" / ".submitit").iterdir())   # the jobs' logs
    # again: every point is already measured, none is written anew
    marks = {p: p.stat().st_mtime_ns for p in (tmp_path / "submitit").rglob("point.parquet")}
    run.reproduce("t/tiny", [], tmp_path / "submitit", Pool(2, "submitit_local"), quiet)
    assert {p: p.stat().st_mtime_ns
            for p in (tmp_path / "submitit").rglob("point.parquet")} == marks


def test_the_comparison_sees_a_different_dataset(tmp_path: Path, monkeypatch) -> None:
    run = tiny(monkeypatch)
    quiet = Console(file=None, quiet=True)
    run.reproduce("t/tiny", [], tmp_path / "a", Pool(1), quiet)
    run.reproduce("t/tiny", ["seed=2"], tmp_path / "b", Pool(1), quiet)
    with pytest.raises(AssertionError):
        same_tables(tmp_path / "a", tmp_path / "b")


def test_bad_launchers_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="allowed joblib, submitit_local, submitit_slurm"):
        Pool(2, "ray")
    with pytest.raises(ConfigError, match="only for the submitit launchers"):
        Pool(2, "joblib", {"slurm_partition": "x"})
