"""KVSwitch's cold mode measured (experiments/kvswitch/cold.yaml,
docs/kvswitch.md): the settling metrics the controller reports, and the
experiment's checks, which hold on the values measured here and fail on
wrong data."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from netkv.experiments.checks import CheckResult, evaluate
from netkv.experiments.spec import load_experiment
from netkv.protocols.kvswitch import settling

EXP = load_experiment("kvswitch/cold")
SETTLED, NO_WORSE, WITHIN = (c.claim for c in EXP.checks)
# λ settled and periods to settle at β = 0.99 / 1.2 (the experiment's notes)
LAM = {"prewarmed": [0.0205, 0.0222], "prewarmed-replan": [0.0079, 0.0082],
       "cold": [0.0134, 0.0126]}
SETTLE = {"prewarmed": [math.nan] * 2, "prewarmed-replan": [1.0, 3.0], "cold": [24.0, 22.0]}


def even(n: int, m: int = 4) -> np.ndarray:
    return np.full(m, n, dtype=np.float64)


def test_settling_is_the_second_half_and_the_last_excursion() -> None:
    skewed = np.array([400.0, 200, 200, 200])            # λ = 0.375
    loads = np.array([skewed, skewed, even(250), even(250), skewed + 1, even(250)])
    lam, first = settling(loads)
    # periods 4-6 summed: [901, 701, 701, 701]
    half = np.array([901.0, 701, 701, 701])
    assert lam == pytest.approx(np.abs(half - half.mean()).sum() / (4 * half.mean()))
    assert first == 6.0                                   # period 5 was above 0.03
    assert settling(np.array([even(10), even(10)]))[1] == 1.0
    assert math.isnan(settling(np.array([even(10), skewed]))[1])   # the last is above
    # idle periods (the drain) are left out
    assert settling(np.array([skewed, even(10), np.zeros(4)])) == (0.0, 2.0)
    assert all(math.isnan(v) for v in settling(np.zeros((2, 4))))


def results(lam: dict[str, list[float]] = LAM,
            settle: dict[str, list[float]] = SETTLE) -> dict[str, CheckResult]:
    t = pl.DataFrame([{"series": s, "x": str(x), "lambda_switch_settled": lam[s][i],
                       "periods_to_settle": settle[s][i], "met": True}
                      for s in LAM for i, x in enumerate(EXP.x.values)])
    return {c.claim: evaluate(c, t, EXP) for c in EXP.checks}  # type: ignore[arg-type]


def test_measured_values_hold() -> None:
    assert {claim: r.verdict for claim, r in results().items()} == dict.fromkeys(
        (SETTLED, NO_WORSE, WITHIN), "holds")


def test_each_check_fails_on_wrong_data() -> None:
    high = {**LAM, "cold": [0.0134, 0.031]}       # above 0.03 at β = 1.2
    assert not results(high)[SETTLED].passed
    worse = {**LAM, "prewarmed": [0.0024, 0.0222]}   # cold 0.011 above the plan
    assert not results(worse)[NO_WORSE].passed and results(worse)[SETTLED].passed
    slow = {**SETTLE, "cold": [31.0, 22.0]}
    assert not results(settle=slow)[WITHIN].passed
    never = {**SETTLE, "cold": [24.0, math.nan]}   # never settled: not a pass
    assert not results(settle=never)[WITHIN].passed
