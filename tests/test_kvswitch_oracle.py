"""tools/kvswitch_oracle.py, Fig. 8a's counting-noise ceiling: exact counts
give the true top-K once the queries per period separate the keys near rank
K, and less with fewer queries (the ceiling docs/kvswitch.md "Keys below T"
quotes is a measurement, not a constant)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import kvswitch_oracle as oracle  # noqa: E402

from netkv.sim.engine import zipf_probabilities  # noqa: E402


def acc(queries: int, k: int = 50) -> float:
    return oracle.oracle_accuracy(zipf_probabilities(1000, 1.2), k, queries, 3, 0.5,
                                  np.random.default_rng(1))


def test_many_queries_find_the_true_top_k_and_few_do_not() -> None:
    assert acc(10_000_000) == 1.0
    assert acc(300) < 0.8                  # measured 0.76
    assert acc(300) < acc(3_000) < acc(100_000) < 1.0


def test_a_ranking_that_ignores_counts_scores_k_over_n() -> None:
    # the judge is |top-K ∩ true top-K| / K: uniform popularity, no signal
    p = np.full(1000, 1e-3)
    a = oracle.oracle_accuracy(p, 100, 1000, 3, 0.5, np.random.default_rng(2))
    assert a == pytest.approx(0.1, abs=0.07)


def test_bad_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert oracle.main(["--keys", "10", "-k", "100"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
