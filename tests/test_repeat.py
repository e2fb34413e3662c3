"""repeat=N (issue #13): the whole search runs N times, each search an
independent replicate steered by its own measurements; loads several searches
measured are compared and flagged when they disagree, and the maximum is the
median of the searches' maxima with a distribution-free interval
(docs/results.md, "Repeats")."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from netkv.slo import median_ci_ranks, search_repeated

try:
    from test_slo import MU, mm1_latencies, mm1_point, point, slo
except ImportError:
    from tests.test_slo import MU, mm1_latencies, mm1_point, point, slo


def clean(i: int, rate: float, phase: str):
    return mm1_point(rate, phase)


def test_the_interval_ranks_are_the_binomial_ones() -> None:
    assert median_ci_ranks(2)[0] is None and median_ci_ranks(4)[0] is None   # < 90%
    k, level = median_ci_ranks(5)
    assert k == 0 and level == pytest.approx(1 - 2 / 32)       # [min, max]: 93.75%
    k, level = median_ci_ranks(10)
    assert k == 1 and level == pytest.approx(1 - 2 * 11 / 1024)
    k, level = median_ci_ranks(20)
    assert k == 5 and level >= 0.9


def stalled(bad: set[int]):
    """Searches in ``bad`` had a stall on a busy VM: every tail 100x longer,
    so alone they fail the SLO at any load above the unloaded one."""
    def measure(i: int, rate: float, phase: str):
        lat = mm1_latencies(min(rate, MU * 0.999))
        if i in bad and phase != "unloaded":
            lat = lat * 100
        return point(min(rate, MU), lat) if rate < MU else mm1_point(rate, phase)
    return measure


def test_one_stalled_search_of_five_moves_the_interval_not_the_median() -> None:
    calm = search_repeated(clean, 5, MU, slo())
    spiky = search_repeated(stalled({2}), 5, MU, slo())
    # the median of the five maxima is the calm searches' knee
    assert spiky.max_throughput_rps == pytest.approx(calm.max_throughput_rps, rel=0.05)
    maxima = [rate for rate, _ in spiky.repeat_maxima()]
    assert sorted(maxima)[0] < 0.2 * sorted(maxima)[-1]   # the stalled search's own maximum
    # the stalled search took its own path: the interval's low end is its maximum
    lo, hi, level = spiky.interval_rps()
    assert lo == min(maxima) and hi == max(maxima) and level == pytest.approx(0.9375)
    # the loads it shared with the others (the first probe) are flagged
    shared = [ld for ld in spiky.points if len(set(ld.ids())) > 1]
    assert shared and any(not ld.agree for ld in shared)
    assert not calm.disagreeing


def test_every_search_follows_its_own_path() -> None:
    out = search_repeated(stalled({0, 1}), 5, MU, slo())
    paths = [[ld.rate for ld in out.points if i in ld.ids()] for i in range(5)]
    assert paths[0] == paths[1] and paths[2] == paths[3] == paths[4] and paths[0] != paths[2]
    # each measurement is kept with the search that made it
    assert sum(len(ld.repeats) for ld in out.loads) == sum(len(p) for p in paths) + 5


def test_identical_searches_give_a_zero_width_interval_and_agree() -> None:
    out = search_repeated(clean, 5, MU, slo())
    lo, hi, level = out.interval_rps()
    assert lo == hi == out.max_throughput_rps and level == pytest.approx(0.9375)
    assert not out.disagreeing


def test_fewer_than_five_searches_have_no_ninety_percent_interval() -> None:
    out = search_repeated(clean, 4, MU, slo())
    assert all(math.isnan(v) for v in out.interval_rps())
    assert out.max_throughput_rps > 0


def test_searches_where_nothing_passes_have_no_maximum() -> None:
    out = search_repeated(clean, 3, MU, slo(kind="fixed", p99_us=0.001, max_points=6))
    assert out.best_repeat() is None and out.max_throughput_rps == 0.0


def test_each_search_is_judged_under_its_own_bound() -> None:
    """A reference measured in a busy minute gives one search a bound 50x
    too loose: that search's maximum is far off, the median is not."""
    try:
        from test_slo import analytic_max_rate
    except ImportError:
        from tests.test_slo import analytic_max_rate

    base = search_repeated(clean, 1, MU, slo()).slo_ns
    loose = search_repeated(clean, 5, MU, slo(), lambda i: base * (50 if i == 3 else 1))
    assert loose.bounds == [base, base, base, 50 * base, base] and loose.slo_ns == base
    maxima = [rate for rate, _ in loose.repeat_maxima()]
    assert maxima[3] > 1.3 * analytic_max_rate(base)   # near mu, the queue's capacity
    assert loose.max_throughput_rps == pytest.approx(maxima[0]) and max(maxima) == maxima[3]
    lo, hi, _ = loose.interval_rps()
    assert hi == maxima[3] and lo == maxima[0]
    # a load both kinds of search measured: each tail against its own bound
    shared = next(ld for ld in loose.points if {0, 3} <= set(ld.ids()))
    assert shared.passed[shared.ids().index(3)]


def test_one_search_is_the_plain_search() -> None:
    from netkv.slo import search_throughput

    one = search_repeated(clean, 1, MU, slo())
    plain = search_throughput(mm1_point, MU, slo())
    assert [ld.rate for ld in one.points] == [ld.rate for ld in plain.points]
    assert one.max_throughput_rps == plain.max_throughput_rps and one.slo_ns == plain.slo_ns


def test_a_simulated_run_with_repeats_writes_every_measurement(tmp_path: Path) -> None:
    from netkv.config.compose import load
    from netkv.runner import execute

    cfg = load(["protocol=hash", "servers=4", "keys=2000", "duration=0.02", "repeat=5",
                "slo.max_points=6", f"out={tmp_path}"])
    console = Console(record=True, width=200)
    points = execute(cfg, tmp_path, [], console)
    text = console.export_text()
    measured = points.filter(pl.col("phase") != "reference")
    assert measured.height % 5 == 0 and set(measured["repeat_index"].to_list()) == set(range(5))
    assert set(measured["repeat"].to_list()) == {5}  # the knob keeps its column
    # a load's rows carry one verdict: the median over the searches that measured it
    per_load = measured.group_by("offered_rps").agg(pl.len().alias("n"),
                                                   pl.col("load_slo_met").n_unique().alias("v"))
    assert (per_load["v"] == 1).all()
    best = points.filter(pl.col("best"))
    assert best.height == 1 and best["slo_met"][0]
    assert "5 independent searches" in text and "94% interval" in text
    lo, hi = best["max_tput_lo_rps"][0], best["max_tput_hi_rps"][0]
    assert lo <= best["achieved_rps"][0] <= hi
    # the SLO reference is measured once per search, just before it: each
    # search's rows carry 5x its own reference's median
    ref = points.filter(pl.col("phase") == "reference")
    assert ref.height == 5
    for i in range(5):
        own = points.filter(pl.col("point") == ("reference" if i == 0 else f"reference-{i}"))
        rows = measured.filter(pl.col("repeat_index") == i)
        assert rows["slo_ns"].to_list() == pytest.approx([5 * own["p50_ns"][0]] * rows.height)
        # measured just before its search: after the previous search's points
        first = points["point"].to_list().index(rows["point"][0])
        assert points["point"].to_list().index(own["point"][0]) == first - 1
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


def test_a_run_with_timed_faults_is_never_remeasured(monkeypatch) -> None:
    """Crashes and switch outages fire once per rack: a second try of a
    stolen point would measure it without them."""
    from types import SimpleNamespace

    from netkv import runner
    from netkv.config.compose import load
    from netkv.results import noise

    tries: list[int] = []
    monkeypatch.setattr(noise, "measure_until_calm",
                        lambda run, max_steal, again: tries.append(again))
    real = SimpleNamespace(real_time=True)
    run_dir = SimpleNamespace(path=None)
    for faults, expected in (([], 2), (["target.faults.crashes=[{server: 1, at_s: 0.5}]"], 0),
                             (["target.faults.switch_outages=[{at_s: 0.5}]"], 0)):
        cfg = load(["target=mininet", "servers=4", *faults])
        runner.measure_point(real, cfg, run_dir, "k", 100.0, 1)  # type: ignore[arg-type]
        assert tries[-1] == expected, faults
