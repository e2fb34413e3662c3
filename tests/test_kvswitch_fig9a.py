"""experiments/kvswitch/fig9a.yaml's checks (KVSwitch vs replicate-to-all):
on the values measured here (the experiment's notes) each holds or differs
as declared, and each fails on wrong data."""

from __future__ import annotations

import polars as pl

from netkv.experiments.checks import CheckResult, evaluate
from netkv.experiments.spec import load_experiment

EXP = load_experiment("kvswitch/fig9a")
LAM = {"kvswitch": [0.0176, 0.0195, 0.0224], "kvswitch-eps0.01": [0.0085, 0.0074, 0.0062],
       "replicate-all": [0.0077, 0.0065, 0.0046]}
REPL = {"kvswitch": [55.7, 83.4, 72.2], "kvswitch-eps0.01": [1957.7, 1341.0, 1911.6],
        "replicate-all": [9687.5] * 3}
LAMBDA, LAMBDA_EPS, REPLICAS, REPLICAS_EPS = (c.claim for c in EXP.checks)


def table(lam: dict[str, list[float]], repl: dict[str, list[float]]) -> pl.DataFrame:
    return pl.DataFrame([{"series": s, "x": str(x), "imbalance": lam[s][i],
                          "replicas_per_server": repl[s][i], "met": True}
                         for s in LAM for i, x in enumerate(EXP.x.values)])


def results(lam: dict[str, list[float]] = LAM,
            repl: dict[str, list[float]] = REPL) -> dict[str, CheckResult]:
    t = table(lam, repl)
    return {c.claim: evaluate(c, t, EXP) for c in EXP.checks}  # type: ignore[arg-type]


def test_measured_values_hold_or_differ_as_declared() -> None:
    got = {claim: r.verdict for claim, r in results().items()}
    assert got == {LAMBDA: "differs", LAMBDA_EPS: "holds", REPLICAS: "holds",
                   REPLICAS_EPS: "differs"}


def test_lambda_checks_hold_within_001_and_fail_beyond() -> None:
    near = {**LAM, "kvswitch": [v + 0.009 for v in LAM["replicate-all"]]}
    assert results(near)[LAMBDA].passed
    far = {**LAM, "kvswitch-eps0.01": [LAM["replicate-all"][0] + 0.011, 0.0074, 0.0062]}
    assert not results(far)[LAMBDA_EPS].passed


def test_replica_checks_fail_above_15_percent_of_replicate_to_all() -> None:
    many = {**REPL, "kvswitch": [55.7, 83.4, 0.16 * 9687.5]}
    assert not results(repl=many)[REPLICAS].passed
    few = {**REPL, "kvswitch-eps0.01": [1957.7, 1341.0, 0.14 * 9687.5]}
    assert results(repl=few)[REPLICAS_EPS].passed
    # replicate-to-all holding fewer copies than it should turns the check
    fewer_all = {**REPL, "replicate-all": [9687.5, 9687.5, 400.0]}
    assert not results(repl=fewer_all)[REPLICAS].passed
