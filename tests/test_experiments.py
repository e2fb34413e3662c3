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
    "max_tput_rps": [3.0, 1.0, 3.0, 2.9],
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


# a at 0, 0.5, 1.2: 1, 2, 10; b: 100, 50, 5
XS3 = {"key": "alpha", "values": [0, 0.5, 1.2]}
TABLE3 = pl.DataFrame({"series": ["a"] * 3 + ["b"] * 3, "x": ["0", "0.5", "1.2"] * 2,
                       "max_tput_rps": [1.0, 2.0, 10.0, 100.0, 50.0, 5.0]})


def three_x(left_x: object, right_x: object, op: str = ">=") -> Experiment:
    return Experiment.model_validate({
        "description": "t", "x": XS3, "series": {"a": [], "b": []},
        "checks": [{"claim": "c", "left": {"series": "a", "x": left_x}, "op": op,
                    "right": {"series": "b", "x": right_x}}]})


def test_each_side_is_compared_at_the_x_values_it_names():
    """One x against a list: that x against each of them; two lists (or
    all) of one length: by position. The right side's x values were once
    replaced by the left's: a@1.2 >= b@[0, 0.5] compared 10 with b@1.2 = 5
    and held."""
    from netkv.experiments.checks import pairs

    cases = [  # left x, right x, pairs, holds
        (1.2, [0, 0.5], [(1.2, 0), (1.2, 0.5)], False),        # 10 vs 100, 50
        ([0.5, 1.2], [0, 0.5], [(0.5, 0), (1.2, 0.5)], False),  # 2 vs 100
        ([0, 0.5], 1.2, [(0, 1.2), (0.5, 1.2)], False),         # 1 vs 5
        ([1.2], [1.2], [(1.2, 1.2)], True),                     # 10 vs 5
        ("all", [1.2, 1.2, 1.2], [(0, 1.2), (0.5, 1.2), (1.2, 1.2)], False),
        ("all", "all", [(0, 0), (0.5, 0.5), (1.2, 1.2)], False),
    ]
    for left_x, right_x, want, holds in cases:
        exp = three_x(left_x, right_x)
        assert pairs(exp.checks[0], exp) == want, (left_x, right_x)
        got = evaluate(exp.checks[0], TABLE3, exp)
        assert got.passed is holds, (left_x, right_x, got.measured)
    held = three_x(0.5, [1.2, 1.2], op="<=")   # 2 <= 5 twice, never b@0.5 = 50
    assert "a@0.5 = 2e-06 Mreq/s <= b@1.2" in evaluate(held.checks[0], TABLE3, held).measured


def test_a_constant_pairs_with_each_x_of_the_other_side():
    exp = Experiment.model_validate({
        "description": "t", "x": XS3, "series": {"a": [], "b": []},
        "checks": [{"claim": "c", "left": {"value": 3.0}, "op": "<=",
                    "right": {"series": "b", "x": [0, 1.2]}}]})
    got = evaluate(exp.checks[0], TABLE3, exp)   # 3 <= 100, 3 <= 5 (was: b@None missing)
    assert got.passed and got.used == 2, got.measured


def test_a_constant_is_shown_in_the_other_sides_units():
    """`{metric: achieved_rps} <= {value: 255000}` read "0.0369 Mreq/s <=
    255 us = 255 us": the constant took the figure's y (p99) for its unit."""
    table = TABLE3.with_columns(pl.col("max_tput_rps").alias("achieved_rps"),
                                (pl.col("max_tput_rps") * 1e3).alias("p99_ns"))
    exp = Experiment.model_validate({
        "description": "t", "x": XS3, "series": {"a": [], "b": []},
        "y": {"metric": "p99_ns", "label": "p99"},
        "checks": [{"claim": "c", "left": {"series": "a", "x": 1.2, "metric": "achieved_rps"},
                    "op": "<=", "right": {"value": 255000.0}},
                   {"claim": "d", "left": {"value": 255000.0}, "op": ">=",
                    "right": {"series": "a", "x": 1.2, "metric": "achieved_rps"}}]})
    for check in exp.checks:
        got = evaluate(check, table, exp)
        assert got.passed and "0.255 Mreq/s" in got.measured and " us" not in got.measured, \
            got.measured


@pytest.mark.parametrize("left_x, right_x, counts", [
    ([0, 0.5], [0, 0.5, 1.2], "left names 2 x values, right 3"),
    ([0, 0.5], "all", "left names 2 x values, right 3"),
    ("all", [0.5, 1.2], "left names 3 x values, right 2"),
    ([], 0, "left names 0 x values, right 1"),
])
def test_sides_naming_different_numbers_of_x_values_are_refused(left_x, right_x, counts):
    with pytest.raises(ValidationError, match=rf"check 'c': {counts} \(allowed: as many on "
                                              r"both sides, paired by position, or one x"):
        three_x(left_x, right_x)


# --- kind: timeline ---------------------------------------------------------------------

import math  # noqa: E402

import numpy as np  # noqa: E402

from netkv.experiments.checks import evaluate_timeline, recovery_ms  # noqa: E402
from netkv.experiments.timeline import (change_instants, run_overrides,  # noqa: E402
                                        search_overrides)


def timeline_experiment(checks: list[dict], **timeline: object) -> Experiment:
    return Experiment.model_validate({
        "kind": "timeline", "description": "t", "overrides": ["alpha=1.2"],
        "x": {"key": "workload.dynamics.kind", "values": ["hot-in", "random"]},
        "series": {"pegasus": ["protocol=pegasus", "protocol.mode=cold"],
                   "hash": ["protocol=hash"]},
        "timeline": {"load": 0.8, "search": {"pegasus": ["protocol.mode=prewarmed"]},
                     "warmup_s": 0.05, **timeline},
        "checks": checks,
    })


def windows(series: str, x: str, p99: list[float], slo: float = 50.0,
            window_s: float = 0.01) -> pl.DataFrame:
    n = len(p99)
    return pl.DataFrame({
        "series": [series] * n, "x": [x] * n, "t_s": np.arange(n) * window_s,
        "window_s": [window_s] * n, "completed": [100] * n, "p99_ns": p99,
        "slo_ns": [slo] * n,
    })


# 0.2 s per cell, changes at 0.1 (hot-in: 3 windows above, back at 0.13) and
# the cold start at 0 (2 windows above, before the warm-up: not checked).
HOT = [900.0, 700.0] + [30.0] * 8 + [800.0, 600.0, 60.0] + [30.0] * 7
CALM = [900.0] + [30.0] * 19
TIMELINE = pl.concat([windows("pegasus", "hot-in", HOT), windows("pegasus", "random", CALM)])
RESULTS = pl.DataFrame({
    "series": ["pegasus", "pegasus"], "x": ["hot-in", "random"],
    "changes_s": [[0.1], [0.1]], "window_s": [0.01, 0.01], "duration_s": [0.2, 0.2],
})


def test_recovery_is_the_end_of_the_last_window_above_the_slo():
    t = np.arange(20) * 0.01
    over = np.array(HOT) > 50.0
    assert recovery_ms(t, 0.01, over, [0.1], 0.2) == pytest.approx([30.0])
    assert recovery_ms(t, 0.01, over, [0.0, 0.1], 0.2) == pytest.approx([20.0, 30.0])
    # still above in the last window before the next change: never recovered
    stuck = over.copy()
    stuck[10:] = True
    assert recovery_ms(t, 0.01, stuck, [0.1], 0.2) == [math.inf]
    assert recovery_ms(t, 0.01, np.zeros(20, bool), [0.1], 0.2) == [0.0]


def test_the_cold_start_ends_at_the_first_fault():
    """An outage from 0.05 s on (every later window above the SLO) is not a
    cold start that never ends: the start is measured up to the first fault
    (it read "never" before faults bounded it)."""
    from netkv.config.schema import Faults
    from netkv.experiments.timeline import fault_instants, summarize

    p99 = [900.0] + [30.0] * 4 + [math.inf] * 15
    row = {"changes_s": [], "duration_s": 0.2, "window_s": 0.01,
           "faults_s": fault_instants(Faults.model_validate(
               {"switch_outages": [{"at_s": 0.15, "restart_s": 0.19}],
                "crashes": [{"server": 1, "at_s": 0.05}]}))}
    assert row["faults_s"] == [0.05, 0.15, 0.19]
    out = summarize(row, windows("netlr", "4", p99), warmup_s=0.0)
    assert out["start_s"] == pytest.approx(0.01)
    assert out["windows_over"] == 16
    # without the fault instants the same windows read "never"
    assert summarize({**row, "faults_s": []}, windows("netlr", "4", p99), 0.0)["start_s"] == math.inf


def test_recovery_and_no_violation_checks():
    exp = timeline_experiment([
        {"kind": "recovery", "claim": "r100", "series": "pegasus", "x": "hot-in",
         "within_ms": 100},
        {"kind": "recovery", "claim": "r20", "series": "pegasus", "x": "hot-in",
         "within_ms": 20},
        {"kind": "no_violation", "claim": "calm", "series": "pegasus", "x": "random"},
        {"kind": "no_violation", "claim": "hot", "series": "pegasus", "x": "hot-in"},
        {"kind": "no_violation", "claim": "hot, 3 allowed", "series": "pegasus",
         "x": "hot-in", "allowed_windows": 3},
        {"kind": "recovery", "claim": "missing", "series": "hash", "x": "hot-in",
         "within_ms": 100},
    ])
    r100, r20, calm, hot, hot3, missing = (
        evaluate_timeline(c, RESULTS, TIMELINE, exp) for c in exp.checks)
    assert r100.passed and not r20.passed
    assert "30 ms after the changes at 0.1 s" in r100.measured
    assert calm.passed and "0 of 15 windows" in calm.measured   # warm-up excluded
    assert not hot.passed and "3 of 15 windows" in hot.measured and hot3.passed
    assert not missing.passed and "missing" in missing.measured


def test_a_window_with_no_completion_counts_as_above_the_slo():
    exp = timeline_experiment([{"kind": "no_violation", "claim": "c", "series": "pegasus",
                                "x": "random"}])
    stalled = TIMELINE.with_columns(
        completed=pl.when(pl.col("t_s").is_between(0.149, 0.151)).then(0)
        .otherwise(pl.col("completed")),
        p99_ns=pl.when(pl.col("t_s").is_between(0.149, 0.151)).then(0.0)
        .otherwise(pl.col("p99_ns")))
    assert not evaluate_timeline(exp.checks[0], RESULTS, stalled, exp).passed


def test_timeline_experiment_validation():
    with pytest.raises(ValidationError, match="kind 'compare' in a timeline"):
        timeline_experiment([{"claim": "c", "left": {"series": "hash", "x": "hot-in"},
                              "op": ">=", "right": {"value": 1}}])
    with pytest.raises(ValidationError, match="kind 'recovery' in a grid"):
        experiment([{"kind": "recovery", "claim": "r", "series": "hash", "x": 0,
                     "within_ms": 100}])
    with pytest.raises(ValidationError, match="series 'netlr'"):
        timeline_experiment([{"kind": "no_violation", "claim": "n", "series": "netlr",
                              "x": "all"}])
    with pytest.raises(ValidationError, match="x = swap"):
        timeline_experiment([{"kind": "no_violation", "claim": "n", "series": "hash",
                              "x": "swap"}])
    with pytest.raises(ValidationError, match="timeline.search: series 'netcache'"):
        timeline_experiment([], search={"netcache": []})
    with pytest.raises(ValidationError, match="required with kind: timeline"):
        Experiment.model_validate({"kind": "timeline", "description": "t",
                                   "x": {"key": "alpha", "values": [1]},
                                   "series": {"h": []}})


def test_timeline_runs_compose_search_and_long_run_overrides():
    exp = timeline_experiment([], overrides=["topology.drain_ms=10"], window_ms=5)
    assert search_overrides(exp, "pegasus", ["seed=3"]) == (
        "alpha=1.2", "protocol=pegasus", "protocol.mode=cold", "protocol.mode=prewarmed",
        "seed=3")
    assert search_overrides(exp, "hash", []) == ("alpha=1.2", "protocol=hash")
    assert run_overrides(exp, "hash", "random", ["seed=3"]) == (
        "alpha=1.2", "protocol=hash", "workload.dynamics.kind=random", "topology.drain_ms=10",
        "topology.timeline_ms=5", "seed=3")
    assert change_instants(2.0, 8.0) == [2.0, 4.0, 6.0]
    assert change_instants(0.3, 1.0) == pytest.approx([0.3, 0.6, 0.9])


@pytest.mark.slow
def test_timeline_reproduce_end_to_end_and_resume(tmp_path):
    """A tiny timeline (hash, 4 servers, 1000 keys): search, long runs,
    tables, plot, checks; a second run measures nothing again."""
    from rich.console import Console

    from netkv.experiments.timeline import reproduce_timeline

    exp = Experiment.model_validate({
        "kind": "timeline", "description": "tiny",
        "overrides": ["protocol=hash", "servers=4", "keys=1000", "alpha=1.2",
                      "workload.dynamics.period_s=0.05", "slo.max_points=6"],
        "x": {"key": "workload.dynamics.kind", "values": ["hot-in", "random"]},
        "series": {"hash": []},
        "timeline": {"load": 0.5, "periods": 3, "window_ms": 10},
        "checks": [{"kind": "no_violation", "claim": "n", "series": "hash", "x": "all",
                    "allowed_windows": 1000}],
    })
    out = tmp_path / "exp"
    console = Console(file=None, width=200, record=True, quiet=True)
    verdicts = reproduce_timeline(exp, "t/tiny", [], out, 1, console)
    assert [r.verdict for r in verdicts] == ["holds"]
    assert not list(out.glob(".workloads-*"))   # the figure's shared tables: removed
    results = pl.read_parquet(out / "results.parquet")
    timeline = pl.read_parquet(out / "timeline.parquet")
    assert results["changes_s"].to_list() == [pytest.approx([0.05, 0.1])] * 2
    assert len(timeline) == 2 * 15  # 0.15 s in 10 ms windows, per cell
    assert (out / "plot.png").stat().st_size > 0 and (out / "checks.md").is_file()
    slo = results["slo_ns"].unique().to_list()   # one SLO for every series and panel
    assert len(slo) == 1
    assert f"SLO: {round(slo[0] / 1e3, 3):g} us (one bound" in (out / "checks.md").read_text()
    marks = {p: p.stat().st_ino for p in out.rglob("points.d/*/point.parquet")}
    verdicts = reproduce_timeline(exp, "t/tiny", [], out, 1, console)
    assert [r.verdict for r in verdicts] == ["holds"]
    assert {p: p.stat().st_ino for p in out.rglob("points.d/*/point.parquet")} == marks
    assert pl.read_parquet(out / "timeline.parquet").equals(timeline)


# --- honest checks (issue #17) --------------------------------------------------------

from netkv.experiments.checks import exit_code, summarize_verdicts  # noqa: E402


def test_a_none_met_cell_is_never_a_value_and_fails_every_check_touching_it():
    """Two "none met" cells (stored as 0.0 before) passed both "<= 0.5 x" and
    ">= 12 x"; now each check touching one fails and names it."""
    table = pl.DataFrame({"series": ["hash", "hash", "pegasus", "pegasus"],
                          "x": ["0", "1.2", "0", "1.2"], "met": [False, False, True, True],
                          "max_tput_rps": [0.0, 0.0, 3.0, 2.9]})
    exp = experiment([
        {"claim": "le", "left": {"series": "hash", "x": 1.2}, "op": "<=",
         "right": {"series": "hash", "x": 0, "times": 0.5}},
        {"claim": "ge", "left": {"series": "pegasus", "x": 1.2}, "op": ">=",
         "right": {"series": "hash", "x": 1.2, "times": 12}},
        {"claim": "ok", "left": {"series": "pegasus", "x": 1.2}, "op": ">=",
         "right": {"series": "pegasus", "x": 0, "times": 0.9}},
    ])
    le, ge, ok = (evaluate(c, table, exp) for c in exp.checks)
    assert not le.passed and le.verdict == "FAIL" and "hash@1.2 none met" in le.measured
    assert "0.5 x hash@0 none met" in le.measured
    assert not ge.passed and "12 x hash@1.2 none met" in ge.measured
    assert ok.passed and ok.verdict == "holds"


def test_every_check_reports_how_many_cells_it_used_and_none_fails():
    exp = experiment([
        {"claim": "all", "left": {"series": "pegasus", "x": "all"}, "op": "within",
         "right": {"series": "pegasus", "x": 0}, "tolerance": 0.05},
        {"claim": "one", "left": {"series": "hash", "x": 1.2}, "op": "<=",
         "right": {"value": 1.5}},
        {"claim": "nothing", "left": {"value": 1.0}, "op": "<=", "right": {"value": 2.0}},
    ])
    flat, one, nothing = (evaluate(c, TABLE, exp) for c in exp.checks)
    assert flat.used == 2 and "(2 cells)" in flat.measured
    assert one.used == 1 and "(1 cell)" in one.measured
    assert nothing.used == 0 and not nothing.passed and nothing.verdict == "FAIL"
    assert "compares no measured cell" in nothing.measured


def test_a_declared_difference_is_differs_with_by_how_much_and_the_exit_code_says_so():
    why = "our servers have one core (notes)"
    exp = experiment([
        {"claim": "10 x", "left": {"series": "pegasus", "x": 1.2}, "op": ">=",
         "right": {"series": "hash", "x": 1.2, "times": 10}, "differs": why},
        {"claim": "3 x, undeclared", "left": {"series": "pegasus", "x": 1.2}, "op": ">=",
         "right": {"series": "hash", "x": 1.2, "times": 3}},
        {"claim": "2 x", "left": {"series": "pegasus", "x": 1.2}, "op": ">=",
         "right": {"series": "hash", "x": 1.2, "times": 2}, "differs": "stale"},
    ])
    ten, three, two = (evaluate(c, TABLE, exp) for c in exp.checks)
    assert ten.verdict == "differs" and not ten.passed and ten.why == why
    assert "3.45 x" in ten.by   # needs >= 10 x hash = 10, measured 2.9: 10 / 2.9
    assert three.verdict == "FAIL"
    assert two.verdict == "holds"   # a declared difference that holds is a hold
    assert exit_code([two]) == 0
    assert exit_code([two, ten]) == 3
    assert exit_code([two, ten, three]) == 1
    assert summarize_verdicts([two, ten, three]) == {"holds": 1, "differs": 1, "FAIL": 1}


def test_a_claim_missed_by_a_hair_prints_the_digits_that_tell_its_sides_apart():
    """kvswitch/fig9 (installed fraction 1 against "<= 0.9999") read
    "= 1 <= 1 = 1" and "misses the bound by 1 x": a failed comparison whose
    sides round alike shows the digits that tell them apart; a held one and
    a clear miss keep 3 digits."""
    table = pl.DataFrame({"series": ["hash", "pegasus"], "x": ["1.2", "1.2"],
                          "max_tput_rps": [1.0, 2.9]})
    exp = experiment([
        {"claim": "hair", "left": {"series": "hash", "x": 1.2}, "op": "<=",
         "right": {"value": 0.9999}},
        {"claim": "held", "left": {"series": "hash", "x": 1.2}, "op": "<=",
         "right": {"value": 1.00001}},
        {"claim": "clear", "left": {"series": "pegasus", "x": 1.2}, "op": "<=",
         "right": {"value": 1.0}},
    ])
    hair, held, clear = (evaluate(c, table, exp) for c in exp.checks)
    assert "hash@1.2 = 1e-06 Mreq/s <= 9.999e-07 Mreq/s = 9.999e-07 Mreq/s" in hair.measured
    assert hair.by == "misses the bound by 1.0001 x", hair.by
    assert "hash@1.2 = 1e-06 Mreq/s <= 1e-06 Mreq/s = 1e-06 Mreq/s" in held.measured
    assert clear.by == "misses the bound by 2.9 x" and "2.9e-06 Mreq/s <= 1e-06" in clear.measured


def test_a_declared_difference_on_a_none_met_cell_is_a_failure():
    table = TABLE.with_columns(met=pl.Series([True, False, True, True]))
    exp = experiment([{"claim": "c", "left": {"series": "pegasus", "x": 1.2}, "op": ">=",
                       "right": {"series": "hash", "x": 1.2, "times": 10}, "differs": "why"}])
    assert evaluate(exp.checks[0], table, exp).verdict == "FAIL"


def test_timeline_checks_fail_with_no_window_after_the_warm_up_or_after_a_change():
    exp = timeline_experiment([
        {"kind": "no_violation", "claim": "calm", "series": "pegasus", "x": "random"},
        {"kind": "recovery", "claim": "r", "series": "pegasus", "x": "hot-in",
         "within_ms": 100},
    ], warmup_s=0.5)
    # every window ends before the warm-up: "0 of 0 windows above" used to pass
    calm, rec = (evaluate_timeline(c, RESULTS.with_columns(changes_s=pl.Series([[0.6], [0.6]])),
                                   TIMELINE, exp) for c in exp.checks)
    assert not calm.passed and calm.used == 0 and "no window after the warm-up" in calm.measured
    # a change at 0.6 s with every window (all at 9,999 us) before it: "0 ms" used to pass
    assert not rec.passed and rec.used == 0 and "no window" in rec.measured
    slow = TIMELINE.with_columns(p99_ns=pl.lit(9999.0))
    exp0 = timeline_experiment(exp.checks and [exp.checks[1].model_dump()], warmup_s=0.0)
    late = RESULTS.with_columns(changes_s=pl.Series([[0.25], [0.25]]))
    got = evaluate_timeline(exp0.checks[0], late, slow, exp0)
    assert not got.passed and got.verdict == "FAIL" and "no window" in got.measured


def test_timeline_checks_report_the_windows_they_used():
    exp = timeline_experiment([
        {"kind": "recovery", "claim": "r", "series": "pegasus", "x": "hot-in", "within_ms": 100},
        {"kind": "no_violation", "claim": "calm", "series": "pegasus", "x": "random"},
    ])
    rec, calm = (evaluate_timeline(c, RESULTS, TIMELINE, exp) for c in exp.checks)
    assert rec.passed and rec.used == 10 and "10 windows" in rec.measured
    assert calm.passed and calm.used == 15


def test_no_shipped_check_compares_cells_that_differ_only_in_dead_knobs():
    """AMO without writes, a selection policy with nothing replicated: both
    sides would be the same measurement, a check that cannot fail."""
    from netkv.experiments.knobs import dead_comparisons

    found = [f"{name}: {d}" for name in available()
             for d in dead_comparisons(load_experiment(name))
             if load_experiment(name).kind == "grid"]
    assert not found, "\n".join(found)


def test_dead_knob_pairs_are_flagged():
    from netkv.experiments.knobs import dead_comparisons

    exp = Experiment.model_validate({
        "description": "t", "overrides": ["protocol=pegasus", "servers=4", "keys=1000"],
        "x": {"key": "write_ratio", "values": [0, 0.5]},
        "series": {"pegasus": [], "amo": ["protocol.amo=true"],
                   "none": ["protocol.replicated_keys=0", "protocol.selection=random"],
                   "none-wrr": ["protocol.replicated_keys=0"]},
        "checks": [
            {"claim": "amo", "left": {"series": "amo", "x": "all"}, "op": "within",
             "right": {"series": "pegasus", "x": "all"}, "tolerance": 0.1},
            {"claim": "wrr", "left": {"series": "none", "x": 0.5}, "op": ">=",
             "right": {"series": "pegasus", "x": 0.5}},
            {"claim": "sel", "left": {"series": "none", "x": 0.5}, "op": ">=",
             "right": {"series": "none-wrr", "x": 0.5}},
        ],
    })
    found = dead_comparisons(exp)
    # amo@0.5 is live; "none" vs "pegasus" differ in replicated_keys, a live knob
    assert len(found) == 2
    assert found[0].startswith("amo: amo@0 vs pegasus@0") and "protocol.amo" in found[0]
    assert found[1].startswith("sel: none@0.5 vs none-wrr@0.5") and "selection" in found[1]


def tiny_grid(**slo: object) -> Experiment:
    """Half the servers at half speed on one x: a cell-by-cell reference
    used to give each x its own bound (44.3 vs 52.3 us for Fig. 12)."""
    return Experiment.model_validate({
        "description": "tiny", "slo": slo,
        "overrides": ["protocol=hash", "servers=4", "keys=1000", "alpha=0", "workload=uniform",
                      "duration=0.05", "slo.max_points=5", "topology.server.service_ns=20000"],
        "x": {"key": "topology.server.slow_capacity", "values": [1.0, 0.25],
              "per_value": {"0.25": ["topology.server.slow_fraction=0.5"]}},
        "series": {"hash": []},
    })


@pytest.mark.parametrize("per_x", ["", "the paper measured each x under its own bound"])
def test_one_slo_per_figure_unless_the_experiment_declares_one_per_x(tmp_path, monkeypatch,
                                                                    per_x):
    from rich.console import Console

    import netkv.experiments.run as run

    exp = tiny_grid(per_x=per_x)
    monkeypatch.setattr(run, "load_experiment", lambda name: exp)
    run.reproduce("t/tiny", [], tmp_path, 1, Console(file=None, quiet=True))
    assert not list(tmp_path.glob(".workloads-*"))   # the figure's shared tables: removed
    slo = pl.read_parquet(tmp_path / "results.parquet")["slo_ns"].to_list()
    ref = pl.read_parquet(tmp_path / "slo-reference" / ("topology.server.slow_capacity=0.25"
                                                        if per_x else "") / "points.parquet")
    assert ref["phase"].to_list() == ["reference"]
    if per_x:
        assert slo[1] > slo[0] * 1.2   # the slow half's own reference is slower
        assert slo[1] == pytest.approx(float(ref["slo_ns"][0]))
    else:
        assert slo == [pytest.approx(float(ref["slo_ns"][0]))] * 2


def test_an_any_check_holds_when_one_pair_does_and_needs_every_cell():
    exp = experiment([
        {"claim": "as much as 2 x", "left": {"series": "pegasus", "x": "all"}, "op": ">=",
         "right": {"series": "hash", "x": "all", "times": 2}, "quantifier": "any"},
        {"claim": "as much as 4 x", "left": {"series": "pegasus", "x": "all"}, "op": ">=",
         "right": {"series": "hash", "x": "all", "times": 4}, "quantifier": "any",
         "differs": "why"},
    ])
    two, four = (evaluate(c, TABLE, exp) for c in exp.checks)
    assert two.passed and "(any of 2 pairs: 1 hold)" in two.measured
    assert four.verdict == "differs" and "1.38 x" in four.by   # best pair: 4 / 2.9
    gap = TABLE.with_columns(met=pl.Series([True, True, False, True]))
    assert evaluate(exp.checks[0], gap, exp).verdict == "FAIL"


def test_a_fixed_load_experiment_checks_its_point_columns():
    """load_rps: one point per cell; columns: extra point columns, which
    checks may compare, also two metrics of one cell."""
    exp = Experiment.model_validate({
        "description": "t", "load_rps": 1e6, "columns": {"installed_keys": "keys",
                                                         "true_keys": "keys"},
        "x": {"key": "protocol.hot_keys", "values": [10, 20]},
        "series": {"k": ["protocol=kvswitch"]}, "y": {"metric": "installed_keys"},
        "checks": [{"claim": "c", "left": {"series": "k", "x": 10, "metric": "installed_keys"},
                    "op": ">=", "right": {"series": "k", "x": 10, "metric": "true_keys"}}],
    })
    table = pl.DataFrame({"series": ["k", "k"], "x": ["10", "20"],
                          "installed_keys": [10.0, 5.0], "true_keys": [9.0, 20.0]})
    res = evaluate(exp.checks[0], table, exp)
    assert res.passed and res.used == 1
    bad = evaluate(exp.checks[0], table.with_columns(true_keys=pl.lit(11.0)), exp)
    assert not bad.passed
    with pytest.raises(ValidationError, match="installed"):
        Experiment.model_validate({"description": "t", "x": {"key": "a", "values": [1]},
                                   "series": {"s": []}, "y": {"metric": "installed_keys"}})
    with pytest.raises(ValidationError, match="load_rps"):
        Experiment.model_validate({"description": "t", "kind": "timeline", "load_rps": 1.0,
                                   "x": {"key": "a", "values": [1]}, "series": {"s": []},
                                   "timeline": {"load": 0.5}})


def test_minus_compares_the_gap_between_two_series():
    """`minus`: a side is one series' cell less another's at the same x
    (the gap grows with x)."""
    exp = Experiment.model_validate({
        "description": "t", "x": {"key": "write_ratio", "values": [0.1, 0.5]},
        "series": {"a": ["protocol=netlr"], "b": ["protocol=netlr", "protocol.replication=cr"]},
        "y": {"metric": "p99_ns"},
        "checks": [{"claim": "the gap grows", "left": {"series": "b", "minus": "a", "x": 0.5},
                    "op": ">=", "right": {"series": "b", "minus": "a", "x": 0.1}}]})
    table = pl.DataFrame({"series": ["a", "a", "b", "b"], "x": ["0.1", "0.5"] * 2,
                          "p99_ns": [30e3, 40e3, 40e3, 70e3], "met": [True] * 4})
    res = evaluate(exp.checks[0], table, exp)
    assert res.passed and res.used == 4, res
    assert "(b - a)@0.5 = 30 us >= (b - a)@0.1 = 10 us" in res.measured, res.measured
    # the check can fail: b's tail as far above a's at 0.5 as at 0.1 minus 1 us
    narrow = table.with_columns(pl.Series("p99_ns", [30e3, 40e3, 40e3, 49e3]))
    assert not evaluate(exp.checks[0], narrow, exp).passed
    # a missing subtrahend is a missing cell
    assert evaluate(exp.checks[0], table.filter(~((pl.col("series") == "a")
                                                  & (pl.col("x") == "0.5"))), exp).verdict == "FAIL"
    with pytest.raises(ValidationError, match="minus 'c'"):
        Experiment.model_validate({**exp.model_dump(), "checks": [
            {"claim": "c", "left": {"series": "b", "minus": "c", "x": 0.5}, "op": ">=",
             "right": {"value": 0.0}}]})


def test_an_x_axis_of_loads_makes_each_cell_one_point_at_its_x():
    """x.key load_rps: no config override, each cell's offered load is its
    x, no SLO is pinned; `plus` adds to a side (about 1 us above)."""
    exp = Experiment.model_validate({
        "description": "t", "columns": {"switch_p50_ns": "us"},
        "x": {"key": "load_rps", "values": [500000, 1000000]},
        "series": {"a": ["protocol=starcache"], "b": ["protocol=netcache"]},
        "y": {"metric": "switch_p50_ns"},
        "checks": [{"claim": "at most 2 us above", "left": {"series": "a", "x": "all"},
                    "op": "<=", "right": {"series": "b", "x": "all", "plus": 2000}}]})
    assert exp.fixed and [exp.fixed_load(x) for x in exp.x.values] == [5e5, 1e6]
    assert [c.overrides for c in cells(exp, [])][:2] == [("protocol=starcache",)] * 2
    table = pl.DataFrame({"series": ["a", "a", "b", "b"], "x": ["500000", "1000000"] * 2,
                          "switch_p50_ns": [4000.0, 4100.0, 2600.0, 2600.0]})
    res = evaluate(exp.checks[0], table, exp)
    assert res.passed and "b@500000 + 2 us = 4.6 us" in res.measured, res.measured
    late = table.with_columns(pl.when(pl.col("series") == "a").then(4700.0)
                              .otherwise(pl.col("switch_p50_ns")).alias("switch_p50_ns"))
    assert not evaluate(exp.checks[0], late, exp).passed
    plain = experiment([])
    assert not plain.fixed and plain.fixed_load(0) is None
    for bad, match in (({"values": [0]}, "loads > 0"), ({"values": ["x"]}, "loads > 0")):
        with pytest.raises(ValidationError, match=match):
            Experiment.model_validate({"description": "t", "x": {"key": "load_rps", **bad},
                                       "series": {"s": []}})
    with pytest.raises(ValidationError, match="without load_rps"):
        Experiment.model_validate({"description": "t", "load_rps": 1.0,
                                   "x": {"key": "load_rps", "values": [1]},
                                   "series": {"s": []}})


def test_an_x_axis_of_labels_adds_only_its_per_value_overrides():
    exp = Experiment.model_validate({
        "description": "t", "x": {"key": "big_pct", "override": False, "values": [0, 100],
                                  "per_value": {"0": ["workload.value_size=128"],
                                                "100": ["workload.value_size=1024"]}},
        "series": {"hash": ["protocol=hash"]}})
    overrides = [c.overrides for c in cells(exp, [])]
    assert overrides == [("protocol=hash", "workload.value_size=128"),
                         ("protocol=hash", "workload.value_size=1024")]
    with pytest.raises(ValidationError, match="per_value"):
        Experiment.model_validate({
            "description": "t", "x": {"key": "big_pct", "override": False, "values": [0, 1],
                                      "per_value": {"0": ["workload.value_size=128"]}},
            "series": {"hash": ["protocol=hash"]}})


def test_a_mean_check_compares_the_mean_ratio():
    # pegasus / hash: 3 / 3 = 1 and 2.9 / 1 = 2.9, mean 1.95
    exp = experiment([
        {"claim": "1.9 x on average", "left": {"series": "pegasus", "x": "all"}, "op": ">=",
         "right": {"series": "hash", "x": "all", "times": 1.9}, "quantifier": "mean"},
        {"claim": "2 x on average", "left": {"series": "pegasus", "x": "all"}, "op": ">=",
         "right": {"series": "hash", "x": "all", "times": 2.0}, "quantifier": "mean"},
    ])
    ok, short = (evaluate(c, TABLE, exp) for c in exp.checks)
    assert ok.passed and "mean pegasus/hash over 2 pairs = 1.95 x, claim >= 1.9 x" in ok.measured
    assert not short.passed and short.verdict == "FAIL"
    gap = TABLE.with_columns(met=pl.Series([True, True, False, True]))
    assert evaluate(exp.checks[0], gap, exp).verdict == "FAIL"


@pytest.mark.parametrize("quantifier", ["all", "any", "mean"])
def test_the_miss_factor_has_one_scale_whatever_the_quantifier(quantifier):
    """Pegasus at half of hash at every x misses ">= hash" and "hash <=" by
    2 x, whatever the quantifier; mean said 0.5 x (|1 - 0.5|) and 1 x
    (|1 - 2|)."""
    half = TABLE.with_columns(max_tput_rps=pl.Series([100.0, 100.0, 50.0, 50.0]))
    exp = experiment([
        {"claim": "c", "left": {"series": "pegasus", "x": "all"}, "op": ">=",
         "right": {"series": "hash", "x": "all"}, "quantifier": quantifier, "differs": "d"},
        {"claim": "d", "left": {"series": "hash", "x": "all"}, "op": "<=",
         "right": {"series": "pegasus", "x": "all"}, "quantifier": quantifier, "differs": "d"},
    ])
    for check in exp.checks:
        assert evaluate(check, half, exp).by == "misses the bound by 2 x", check.claim
    # 3/12 and 2.9/4 of 4 x hash: the worst pair 4 x, the best 1.38 x; the
    # mean ratio 1.95 of 4: 2.05 x
    four = experiment([{"claim": "c", "left": {"series": "pegasus", "x": "all"}, "op": ">=",
                        "right": {"series": "hash", "x": "all", "times": 4},
                        "quantifier": quantifier, "differs": "d"}])
    want = {"all": "4", "any": "1.38", "mean": "2.05"}[quantifier]
    assert evaluate(four.checks[0], TABLE, four).by == f"misses the bound by {want} x"
    if quantifier != "mean":   # within: |0.25 - 1| and |0.725 - 1| over 5%
        near = experiment([{"claim": "c", "left": {"series": "pegasus", "x": "all"},
                            "op": "within", "tolerance": 0.05, "quantifier": quantifier,
                            "right": {"series": "hash", "x": "all", "times": 4}}])
        want = {"all": "up to 15", "any": "at least 5.5"}[quantifier]
        assert evaluate(near.checks[0], TABLE, near).by == f"|ratio - 1| {want} x the tolerance"


def test_a_mean_within_check_is_refused():
    """quantifier mean with op within was accepted and evaluated as "any":
    ratios 1, 0.33 and 0.1 held within 5% (one pair did)."""
    from netkv.experiments.spec import Check

    claim = {"claim": "c", "left": {"series": "pegasus", "x": "all"}, "op": "within",
             "tolerance": 0.05, "right": {"series": "hash", "x": "all"}, "quantifier": "mean"}
    refused = r"check 'c': quantifier mean with op within \(allowed: mean with >= or <="
    with pytest.raises(ValidationError, match=refused):
        Check.model_validate(claim)
    with pytest.raises(ValidationError, match=refused):
        experiment([claim])


def test_a_throughput_check_compares_spans_of_windows():
    from netkv.experiments.checks import evaluate_timeline
    from netkv.experiments.spec import Experiment

    exp = Experiment.model_validate({
        "kind": "timeline", "description": "t", "x": {"key": "alpha", "values": [1]},
        "series": {"s": []}, "timeline": {"load": 0.5},
        "checks": [
            {"kind": "throughput", "claim": "down", "series": "s", "x": 1,
             "window_s": [2, 3], "op": "<=", "fraction": 0.05, "reference_s": [0, 2]},
            {"kind": "throughput", "claim": "back", "series": "s", "x": 1,
             "window_s": [3, 5], "op": ">=", "fraction": 0.9, "reference_s": [0, 2]},
            {"kind": "throughput", "claim": "none", "series": "s", "x": 1,
             "window_s": [7, 8], "op": ">=", "fraction": 0.9, "reference_s": [0, 2]},
        ]})
    timeline = pl.DataFrame({"series": "s", "x": "1", "t_s": [0.0, 1, 2, 3, 4],
                             "completed": [100, 100, 2, 95, 80]})
    down, back, none = (evaluate_timeline(c, pl.DataFrame(), timeline, exp) for c in exp.checks)
    assert down.passed and "0.02 x the 100" in down.measured
    assert not back.passed and back.verdict == "FAIL"  # 87.5 < 90
    assert not none.passed and "no window" in none.measured


def test_a_run_check_compares_a_long_runs_value():
    from pydantic import ValidationError

    from netkv.experiments.checks import evaluate_timeline
    from netkv.experiments.spec import Experiment

    spec = {
        "kind": "timeline", "description": "t", "x": {"key": "alpha", "values": [1, 2]},
        "series": {"s": []}, "timeline": {"load": 0.8, "saturate": True},
        "columns": {"overflow_ratio": "overflow"},
        "checks": [
            {"kind": "run", "claim": "low", "series": "s", "x": "all",
             "metric": "overflow_ratio", "op": "<=", "value": 0.001},
            {"kind": "run", "claim": "served", "series": "s", "x": 1,
             "metric": "completion", "op": ">=", "value": 0.99},
        ]}
    exp = Experiment.model_validate(spec)
    results = pl.DataFrame({"series": "s", "x": ["1", "2"], "overflow_ratio": [0.0005, 0.002],
                            "completion": [1.0, 0.5]})
    low, served = (evaluate_timeline(c, results, pl.DataFrame(), exp) for c in exp.checks)
    assert not low.passed and low.verdict == "FAIL" and "s@2: overflow_ratio 0.002" in low.measured
    assert "misses the bound by 2 x" == low.by
    assert served.passed
    ok = results.with_columns(overflow_ratio=pl.Series([0.0005, 0.001]))
    assert evaluate_timeline(exp.checks[0], ok, pl.DataFrame(), exp).passed
    # a run that was not made, or lacks the value, never passes
    gone = results.filter(pl.col("x") == "1")
    assert "s@2: overflow_ratio missing" in evaluate_timeline(exp.checks[0], gone,
                                                              pl.DataFrame(), exp).measured
    assert not evaluate_timeline(exp.checks[0], results.drop("overflow_ratio"),
                                 pl.DataFrame(), exp).passed
    assert not evaluate_timeline(exp.checks[0], pl.DataFrame(), pl.DataFrame(), exp).passed
    bad = {**spec, "checks": [{**spec["checks"][0], "metric": "overflow"}]}
    with pytest.raises(ValidationError, match="metric 'overflow' \\(allowed: achieved_rps"):
        Experiment.model_validate(bad)


INF = float("inf")
P99 = pl.DataFrame({
    "series": ["hash", "hash", "pegasus", "pegasus"],
    "x": ["0", "1.2", "0", "1.2"],
    "max_tput_rps": [30e3, INF, 20e3, INF],
})


def test_an_unbounded_value_orders_against_a_finite_one():
    # +inf (a p99 past the knee) is a measurement an ordering can use:
    # finite <= inf holds, inf <= finite is false, both unbounded cannot be
    # ordered, and a ratio (within) cannot use it at all
    exp = experiment([
        {"claim": "below", "left": {"series": "pegasus", "x": 0}, "op": "<=",
         "right": {"series": "hash", "x": 1.2}},
        {"claim": "above", "left": {"series": "hash", "x": 1.2}, "op": "<=",
         "right": {"series": "pegasus", "x": 0}, "differs": "declared"},
        {"claim": "both", "left": {"series": "pegasus", "x": 1.2}, "op": "<=",
         "right": {"series": "hash", "x": 1.2}},
        {"claim": "ratio", "left": {"series": "hash", "x": 1.2}, "op": "within",
         "right": {"series": "pegasus", "x": 0}, "tolerance": 0.5},
        {"claim": "nan", "left": {"series": "pegasus", "x": 0}, "op": "<=",
         "right": {"series": "hash", "x": 1.2}},
    ])
    below, above, both, ratio = (evaluate(c, P99, exp) for c in exp.checks[:4])
    assert below.passed and below.verdict == "holds" and "unbounded" in below.measured
    assert not above.passed and above.verdict == "differs"
    assert not both.passed and both.verdict == "FAIL" and "unbounded" in both.measured
    assert not ratio.passed and ratio.verdict == "FAIL" and "unbounded" in ratio.measured
    nan = P99.with_columns(pl.lit(float("nan")).alias("max_tput_rps"))
    missing = evaluate(exp.checks[4], nan, exp)
    assert not missing.passed and missing.verdict == "FAIL" and "missing" in missing.measured


def test_an_interrupted_reproduce_is_one_line_naming_where_to_resume(tmp_path, monkeypatch,
                                                                     capsys):
    """Ctrl-C or SIGTERM (`timeout`, a batch scheduler) during `reproduce`:
    one line naming the experiment directory to resume with --out, exit 130,
    as `run` does; no traceback."""
    import netkv.experiments.run
    from netkv.cli import main

    def interrupted(name, extra, out, jobs, console):  # noqa: ANN001, ANN202
        out.mkdir(parents=True)   # a cell or two finished
        raise KeyboardInterrupt

    monkeypatch.setattr(netkv.experiments.run, "reproduce", interrupted)
    out = tmp_path / "fig7"
    assert main(["reproduce", "pegasus/fig7", "--out", str(out)]) == 130
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0], lines
    assert f"--out {out}" in lines[0], lines[0]
    monkeypatch.chdir(tmp_path)   # without --out: the default directory is named
    assert main(["reproduce", "pegasus/fig7"]) == 130
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "--out runs/reproduce/pegasus-fig7/" in line, line


@pytest.mark.parametrize("figure", ["pegasus/fig12", "pegasus/fig13"], ids=["grid", "timeline"])
def test_an_out_holding_another_experiment_or_a_run_is_refused(figure, tmp_path, capsys):
    """`reproduce pegasus/fig12 --out <kvswitch/fig9's folder>` ran, and
    overwrote fig9's results, plot and checks with fig12's beside fig9's
    runs. Refused in one line, exit 2, nothing written; a run's folder too."""
    from netkv.cli import main
    from netkv.experiments.reproduce import check_experiment_dir, write_experiment

    out = tmp_path / "fig9"
    out.mkdir()
    write_experiment(out, "kvswitch/fig9", load_experiment("kvswitch/fig9"))
    held = sorted(out.iterdir()), (out / "experiment.yaml").read_text()
    assert main(["reproduce", figure, "--out", str(out), "--jobs", "1"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "holds experiment 'kvswitch/fig9'" in lines[0], lines
    assert f"not '{figure}'" in lines[0], lines[0]
    assert (sorted(out.iterdir()), (out / "experiment.yaml").read_text()) == held
    check_experiment_dir(out, "kvswitch/fig9")   # its own experiment resumes

    # a run's folder, and a run -m sweep's (its jobs below it)
    for kind, marker, text in (("a run", "config.yaml", "protocol: {name: hash}\n"),
                               ("a sweep", "multirun.yaml", "hydra: {}\n")):
        held_dir = tmp_path / marker
        held_dir.mkdir()
        (held_dir / marker).write_text(text)
        assert main(["reproduce", figure, "--out", str(held_dir)]) == 2
        line = capsys.readouterr().err.strip()
        assert f"holds {kind} ({marker}), not an experiment" in line and "\n" not in line
        assert sorted(p.name for p in held_dir.iterdir()) == [marker]


@pytest.mark.parametrize(("name", "meant"), [
    ("pegasus/fig77", "did you mean pegasus/fig7,"),
    ("fig7", "did you mean kvswitch/fig7, netlr/fig7, pegasus/fig7?"),
    ("../conf/config", "(choose one of: kvswitch/cold,"),
], ids=["typo", "no-paper", "a-path"])
def test_a_wrong_experiment_name_says_what_was_meant(name, meant, capsys):
    """One line, exit 2, the likely names first: the line listed every
    experiment (over 50) and nothing nearer, and a path to a YAML file that
    is no experiment was read as one ("description: Field required")."""
    from netkv.cli import main

    assert main(["reproduce", name]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and line.startswith(f"netkv: invalid experiment: '{name}' (")
    assert meant in line and "pegasus/fig13" in line, line


def test_a_refused_cell_folder_names_the_experiments_out(tmp_path, monkeypatch, capsys):
    """A cell's run folder refused (the experiment resumed with other
    overrides, or by another build) said "pass another out=<dir>", which
    reproduce does not take: it names --out."""
    import netkv.experiments.run
    from netkv.cli import main
    from netkv.results.rundir import RunDir

    cell = tmp_path / "fig9" / "kvswitch" / "protocol.hot_keys=1000"
    RunDir(cell).prepare("duration: 0.01\n", {})

    def resumed_with_another_duration(name, extra, out, pool, console):  # noqa: ANN001, ANN202
        RunDir(cell).prepare("duration: 0.02\n", {})

    monkeypatch.setattr(netkv.experiments.run, "reproduce", resumed_with_another_duration)
    assert main(["reproduce", "kvswitch/fig9", "--out", str(tmp_path / "fig9")]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "(duration: 0.01 -> 0.02)" in line, line
    assert line.endswith("; pass another --out or remove it") and "out=<dir>" not in line, line


def wrong_grid(exp: Experiment, met: bool) -> pl.DataFrame:
    """Every cell of ``exp`` present, each metric a check reads NaN; ``met``
    False: nothing met the SLO anywhere."""
    metrics = {exp.y.metric} | {ref.metric for c in exp.checks
                                for ref in (c.left, c.right) if ref.metric}
    rows = [{"series": s, "x": str(x), "met": met, **{m: math.nan for m in metrics}}
            for s in exp.series for x in exp.x.values]
    return pl.DataFrame(rows)


def test_every_shipped_check_fails_on_wrong_data():
    """The guide's rule, on every shipped claim: a grid where nothing met
    the SLO or every value is NaN, and a timeline with no windows and no
    long run, fail every check (FAIL, not holds, not differs)."""
    empty_timeline = pl.DataFrame(schema={
        "series": pl.String, "x": pl.String, "t_s": pl.Float64, "window_s": pl.Float64,
        "completed": pl.Int64, "p99_ns": pl.Float64, "slo_ns": pl.Float64})
    empty_results = pl.DataFrame(schema={"series": pl.String, "x": pl.String, "met": pl.Boolean})
    found, checked = [], 0
    for name in available():
        exp = load_experiment(name)
        if exp.kind == "grid":
            results = [evaluate(c, wrong_grid(exp, met), exp)
                       for met in (False, True) for c in exp.checks]
        else:
            results = [evaluate_timeline(c, empty_results, empty_timeline, exp)
                       for c in exp.checks]
        checked += len(results)
        found += [f"{name}: {r.claim!r} reads {r.verdict} on wrong data ({r.measured})"
                  for r in results if r.passed or r.verdict != "FAIL"]
    assert checked > 100
    assert not found, "\n".join(found)
