"""Experiment files validate, and claims are evaluated as stated."""

from __future__ import annotations

import polars as pl
import pytest
from pydantic import ValidationError

from netkv.experiments.checks import evaluate
from netkv.experiments.reproduce import cells
from netkv.experiments.spec import Experiment, available, load_experiment


def experiment(checks: list[dict]) -> Experiment:
    return Experiment.model_validate({
        "description": "t", "x": {"key": "alpha", "values": [0, 1.2],
                                  "per_value": {"0": ["workload=uniform"]}},
        "series": {"hash": ["protocol=hash"], "pegasus": ["protocol=pegasus"]},
        "checks": checks,
    })


TABLE = pl.DataFrame({
    "series": ["hash", "hash", "pegasus", "pegasus"],
    "x": ["0", "1.2", "0", "1.2"],
    "max_tput_mrps": [3.0, 1.0, 3.0, 2.9],
})


def test_ratio_check_passes_and_fails():
    exp = experiment([
        {"claim": "a", "left": {"series": "pegasus", "x": 1.2}, "op": ">=",
         "right": {"series": "hash", "x": 1.2, "times": 2.5}},
        {"claim": "b", "left": {"series": "pegasus", "x": 1.2}, "op": ">=",
         "right": {"series": "hash", "x": 1.2, "times": 3}},
    ])
    ok, bad = (evaluate(c, TABLE, exp) for c in exp.checks)
    assert ok.passed and not bad.passed
    assert "pegasus@1.2 = 2.9" in ok.measured


def test_within_over_all_x():
    exp = experiment([
        {"claim": "flat", "left": {"series": "pegasus", "x": "all"}, "op": "within",
         "right": {"series": "pegasus", "x": 0}, "tolerance": 0.05},
        {"claim": "not flat", "left": {"series": "hash", "x": "all"}, "op": "within",
         "right": {"series": "hash", "x": 0}, "tolerance": 0.05},
        {"claim": "const", "left": {"series": "hash", "x": 1.2}, "op": "<=",
         "right": {"value": 1.5}},
    ])
    flat, not_flat, const = (evaluate(c, TABLE, exp) for c in exp.checks)
    assert flat.passed and not not_flat.passed and const.passed


def test_missing_cell_fails_the_check():
    exp = experiment([{"claim": "m", "left": {"series": "hash", "x": 1.2}, "op": ">=",
                       "right": {"value": 0.0}}])
    assert not evaluate(exp.checks[0], TABLE.filter(pl.col("x") == "0"), exp).passed


def test_bad_reference_is_rejected():
    with pytest.raises(ValidationError, match="series 'netlr'"):
        experiment([{"claim": "x", "left": {"series": "netlr", "x": 1.2}, "op": ">=",
                     "right": {"value": 1}}])
    with pytest.raises(ValidationError, match="x = 0.5"):
        experiment([{"claim": "x", "left": {"series": "hash", "x": 0.5}, "op": ">=",
                     "right": {"value": 1}}])


def test_cells_cross_series_and_x_with_per_value_overrides():
    grid = cells(experiment([]), ["duration=0.1"])
    assert len(grid) == 4
    first = grid[0]
    assert first.overrides == ("protocol=hash", "alpha=0", "workload=uniform", "duration=0.1")


def test_every_shipped_experiment_loads():
    for name in available():
        load_experiment(name)
