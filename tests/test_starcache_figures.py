"""StarCache's figure checks (experiments/starcache/fig11, fig13, fig13b, fig14,
fig17) on the values this machine measured (docs/starcache.md), and each
check failing on wrong data: a check that cannot fail would prove nothing.
"""

from __future__ import annotations

import polars as pl

from netkv.experiments.checks import evaluate
from netkv.experiments.spec import load_experiment

Cells = dict[tuple[str, str], dict[str, float]]


def table(cells: Cells) -> pl.DataFrame:
    rows = [{"series": s, "x": x, **m} for (s, x), m in cells.items()]
    return pl.DataFrame(rows)


def verdicts(fig: str, cells: Cells) -> list[str]:
    exp = load_experiment(f"starcache/{fig}")
    t = table(cells)
    return [evaluate(c, t, exp).verdict for c in exp.checks]


LOADS = ["500000", "1000000", "1500000", "3000000"]
FIG11 = {  # p50 us, p99 us, saturated Mreq/s per load
    "starcache": ([7.76, 7.89, 8.05, 8.67], [28.5, 29.9, 31.3, 38.8], [5.55, 5.57, 5.57, 5.60]),
    "netcache": ([8.86, 9.18, 9.57, 11.4], [30.3, 33.9, 40.1, 34500], [2.42, 2.43, 2.43, 2.47]),
    "nocache": ([9.57, 10.0, 10.6, 13.6], [31.2, 34.9, 45.2, 52600], [2.28, 2.28, 2.28, 2.40]),
}


def fig11_cells(data: dict[str, tuple[list[float], list[float], list[float]]]) -> Cells:
    return {(s, x): {"p50_ns": p50[i] * 1e3, "p99_ns": p99[i] * 1e3,
                     "sat_tput_rps": sat[i] * 1e6}
            for s, (p50, p99, sat) in data.items() for i, x in enumerate(LOADS)}


def test_fig11_checks_hold_on_the_measured_values_and_fail_on_swapped_series() -> None:
    assert verdicts("fig11", fig11_cells(FIG11)) == ["holds"] * 6
    # NoCache's numbers as StarCache's and the other way round: every order breaks
    wrong = {"starcache": FIG11["nocache"], "netcache": FIG11["netcache"],
             "nocache": FIG11["starcache"]}
    assert verdicts("fig11", fig11_cells(wrong)) == ["FAIL"] * 6


def tput_cells(data: dict[str, list[float]], xs: list[str]) -> Cells:
    return {(s, x): {"max_tput_rps": v[i] * 1e6} for s, v in data.items()
            for i, x in enumerate(xs)}


def test_fig13_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    xs = ["16", "32", "64"]
    measured = {"starcache": [3.82, 4.05, 3.88], "netcache": [1.74, 1.63, 1.91],
                "nocache": [1.58, 1.55, 1.86]}
    # the three "falls" claims differ (declared, notes); "best" holds
    assert verdicts("fig13", tput_cells(measured, xs)) == ["differs"] * 3 + ["holds"] * 2
    falling = {"starcache": [4.0, 3.9, 3.8], "netcache": [1.8, 1.7, 1.6],
               "nocache": [1.6, 1.5, 1.4]}
    assert verdicts("fig13", tput_cells(falling, xs)) == ["holds"] * 5
    worst = {"starcache": [1.0, 1.0, 1.0], "netcache": [1.8, 1.8, 1.8],
             "nocache": [1.5, 1.5, 1.5]}
    assert verdicts("fig13", tput_cells(worst, xs)) == ["differs"] * 3 + ["FAIL"] * 2


def test_fig13b_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    xs = ["64", "256", "1024"]
    measured = {"starcache": [3.72, 3.72, 3.55], "netcache": [10.13, 1.52, 1.52],
                "nocache": [1.52, 1.52, 1.52]}
    assert verdicts("fig13b", tput_cells(measured, xs)) == \
        ["holds", "holds", "differs", "holds", "holds"]
    # rising with size, StarCache behind NetCache above 64 B, ahead at 64 B
    wrong = {"starcache": [3.0, 1.0, 3.2], "netcache": [2.0, 2.0, 2.1],
             "nocache": [1.5, 1.5, 1.6]}
    assert verdicts("fig13b", tput_cells(wrong, xs)) == \
        ["FAIL", "FAIL", "differs", "FAIL", "FAIL"]


def moM_cells(data: dict[str, list[float]], xs: list[str]) -> Cells:
    return {(s, x): {"min_over_max": v[i]} for s, v in data.items() for i, x in enumerate(xs)}


def test_fig14_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    xs = ["9", "18", "36"]
    measured = {"starcache": [0.799, 0.744, 0.664], "nocache": [0.583, 0.363, 0.196],
                "uniform": [0.972, 0.974, 0.967]}
    assert verdicts("fig14", moM_cells(measured, xs)) == ["differs", "holds", "holds"]
    assert verdicts("fig14", moM_cells({"starcache": [0.9] * 3, "nocache": [0.5] * 3,
                                        "uniform": [0.95] * 3}, xs)) == ["holds"] * 3
    wrong = {"starcache": [0.5] * 3, "nocache": [0.6] * 3, "uniform": [0.4] * 3}
    assert verdicts("fig14", moM_cells(wrong, xs)) == ["differs", "FAIL", "FAIL"]



def test_fig17_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    xs = ["1", "2", "3", "4"]
    assert verdicts("fig17", moM_cells({"starcache": [0.656, 0.597, 0.455, 0.452]}, xs)) == \
        ["differs", "holds", "differs"]
    assert verdicts("fig17", moM_cells({"starcache": [0.9, 0.88, 0.87, 0.85]}, xs)) == \
        ["holds"] * 3
    # rising with the packets: the drop fails; "slightly" fails (declared:
    # a declared claim that misses is "differs", never "holds")
    assert verdicts("fig17", moM_cells({"starcache": [0.5, 0.6, 0.7, 0.9]}, xs))[1:] == \
        ["FAIL", "differs"]
