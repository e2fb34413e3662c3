"""repeat=N (issue #13): each load point measured N times; the search steers
by the medians, flags loads whose repeats disagree, and reports the median of
the repeats' maxima with a distribution-free interval (docs/slo.md)."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from netkv.slo import median_ci_ranks, search_throughput

try:
    from test_slo import MU, mm1_latencies, mm1_point, point, slo
except ImportError:
    from tests.test_slo import MU, mm1_latencies, mm1_point, point, slo


def test_the_interval_ranks_are_the_binomial_ones() -> None:
    assert median_ci_ranks(2)[0] is None and median_ci_ranks(4)[0] is None   # < 90%
    k, level = median_ci_ranks(5)
    assert k == 0 and level == pytest.approx(1 - 2 / 32)       # [min, max]: 93.75%
    k, level = median_ci_ranks(10)
    assert k == 1 and level == pytest.approx(1 - 2 * 11 / 1024)
    k, level = median_ci_ranks(20)
    assert k == 5 and level >= 0.9


def noisy(spike_every: int):
    """M/M/1 repeats, one in ``spike_every`` with a tail 100x longer (a stall
    on a busy VM): alone it would fail the SLO at any load."""
    calls = {"n": 0}

    def measure(rate: float, phase: str) -> list:
        out = []
        for _ in range(5):
            calls["n"] += 1
            lat = mm1_latencies(min(rate, MU * 0.999))
            if calls["n"] % spike_every == 0:
                lat = lat * 100
            out.append(point(min(rate, MU), lat) if rate < MU else mm1_point(rate, phase))
        return out
    return measure


def test_the_median_steers_the_search_past_one_bad_repeat() -> None:
    clean = search_throughput(lambda r, p: [mm1_point(r, p)] * 5, MU, slo())
    spiky = search_throughput(noisy(5), MU, slo())
    # every load has one spiked repeat of five: the medians still find the knee
    assert spiky.max_throughput_rps == pytest.approx(clean.max_throughput_rps, rel=0.05)
    # a load where some repeats pass is flagged (the spiked one fails there);
    # past the knee all five fail and agree
    passing = [ld for ld in spiky.loads if any(ld.passed)]
    assert len(passing) >= 3 and all(not ld.agree for ld in passing)
    assert all(ld.agree for ld in spiky.loads if not any(ld.passed))
    assert not clean.disagreeing
    # judged one by one, the spiked repeats fail: the interval's low end is 0
    lo, hi, level = spiky.interval_rps()
    assert lo == 0.0 and hi > 0


def test_identical_repeats_give_a_zero_width_interval_and_agree() -> None:
    out = search_throughput(lambda r, p: [mm1_point(r, p)] * 5, MU, slo())
    lo, hi, level = out.interval_rps()
    assert lo == hi == out.max_throughput_rps and level == pytest.approx(0.9375)
    assert not out.disagreeing


def test_fewer_than_five_repeats_have_no_ninety_percent_interval() -> None:
    out = search_throughput(lambda r, p: [mm1_point(r, p)] * 4, MU, slo())
    assert all(math.isnan(v) for v in out.interval_rps())
    assert out.max_throughput_rps > 0


def test_a_load_where_nothing_passes_has_no_maximum() -> None:
    out = search_throughput(lambda r, p: [mm1_point(r, p)] * 3, MU,
                            slo(kind="fixed", p99_us=0.001, max_points=6))
    assert out.best_repeat() is None and out.max_throughput_rps == 0.0


def test_a_simulated_run_with_repeats_writes_every_measurement(tmp_path: Path) -> None:
    from netkv.config.compose import load
    from netkv.runner import execute

    cfg = load(["protocol=hash", "servers=4", "keys=2000", "duration=0.02", "repeat=5",
                "slo.max_points=6", f"out={tmp_path}"])
    console = Console(record=True, width=200)
    points = execute(cfg, tmp_path, [], console)
    text = console.export_text()
    measured = points.filter(pl.col("phase") != "reference")
    assert measured.height % 5 == 0 and set(measured["repeat"].to_list()) == set(range(5))
    per_load = measured.group_by("offered_rps").agg(pl.len().alias("n"),
                                                   pl.col("load_slo_met").n_unique().alias("v"))
    assert (per_load["n"] == 5).all() and (per_load["v"] == 1).all()
    best = points.filter(pl.col("best"))
    assert best.height == 1 and best["slo_met"][0]
    assert "5 repeats per load" in text and "94% interval" in text
    lo, hi = best["max_tput_lo_rps"][0], best["max_tput_hi_rps"][0]
    assert lo <= best["achieved_rps"][0] <= hi
    # the SLO reference is measured five times too, and the bound is 5x the
    # median of their medians
    ref = points.filter(pl.col("phase") == "reference")
    assert ref.height == 5
    assert best["slo_ns"][0] == pytest.approx(5 * float(ref["p50_ns"].median()))
    # a rerun resumes every repeat: nothing measured again
    marks = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("point.parquet")}
    execute(cfg, tmp_path, [], Console(file=None, quiet=True))
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("point.parquet")} == marks


def test_repeat_is_validated_in_one_line() -> None:
    from netkv.config.compose import ConfigError, load

    with pytest.raises(ConfigError, match="repeat"):
        load(["repeat=0"])
    with pytest.raises(ConfigError, match="repeat_tolerance"):
        load(["slo.repeat_tolerance=0"])




def test_a_disagreement_names_hypervisor_steal_above_two_percent() -> None:
    from netkv.results.noise import steal_fraction, steal_note

    assert steal_fraction((0, 100, 5), (0, 300, 25)) == pytest.approx(0.1)
    calm, stolen = point(1000.0, mm1_latencies(1000.0)), point(1000.0, mm1_latencies(1000.0))
    calm.noise["host_steal"], stolen.noise["host_steal"] = 0.01, 0.11
    assert steal_note([calm, calm]) == ""
    assert steal_note([calm, stolen]) == "; hypervisor steal up to 11%"
    assert steal_note([point(1000.0, mm1_latencies(1000.0))]) == ""   # no column: nothing


def test_a_point_under_steal_is_measured_again_at_most_steal_retries_times(monkeypatch) -> None:
    from netkv.results import noise

    def fake(steals: list[float]):
        it = iter(steals)

        def measure(run):
            r = point(1000.0, mm1_latencies(1000.0))
            r.noise["host_steal"] = next(it)
            return r
        return measure

    monkeypatch.setattr(noise, "measure", fake([0.2, 0.01]))
    r = noise.measure_until_calm(lambda: None, 0.05, 2)
    assert r.noise["host_steal"] == 0.01 and r.noise["steal_remeasured"] == 1
    monkeypatch.setattr(noise, "measure", fake([0.2, 0.3, 0.4, 0.0]))
    r = noise.measure_until_calm(lambda: None, 0.05, 2)   # gives up: the last is kept
    assert r.noise["host_steal"] == 0.4 and r.noise["steal_remeasured"] == 2
    monkeypatch.setattr(noise, "measure", fake([0.2]))
    assert noise.measure_until_calm(lambda: None, 0.05, 0).noise["steal_remeasured"] == 0


def test_the_simulator_never_remeasures() -> None:
    from netkv.targets.mininet import MininetTarget
    from netkv.targets.sim import SimTarget

    assert SimTarget.real_time is False and MininetTarget.real_time is True
