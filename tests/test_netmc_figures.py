"""The claims of NetMC's thesis figures (experiments/netmc/fig10a, ...) are
checks that hold on data shaped as the thesis reports it and fail on data
that contradicts them, one check at a time."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from netkv.experiments.checks import evaluate
from netkv.experiments.spec import load_experiment

Series = dict[str, list[float]]


def table(name: str, metrics: dict[str, Series]) -> pl.DataFrame:
    """One row per (series, x) of experiment ``name``; ``metrics`` gives each
    metric's value per series in the order of the experiment's x values."""
    xs = [str(x) for x in load_experiment(name).x.values]
    first = next(iter(metrics.values()))
    rows: dict[str, list[object]] = {"series": [], "x": []}
    for series in first:
        rows["series"] += [series] * len(xs)
        rows["x"] += xs
    for metric, per_series in metrics.items():
        rows[metric] = [v for series in first for v in per_series[series]]
    return pl.DataFrame(rows)


def passed(name: str, data: pl.DataFrame) -> dict[str, bool]:
    exp = load_experiment(name)
    return {c.claim: evaluate(c, data, exp).passed for c in exp.checks}


def scaled(values: list[float], factors: list[float]) -> list[float]:
    return [v * f for v, f in zip(values, factors)]


def assert_each_check_fails_alone(name: str, good: pl.DataFrame,
                                  wrong: dict[str, Callable[[pl.DataFrame], pl.DataFrame]]
                                  ) -> None:
    """Every check holds on ``good``; each mutation breaks its own check (and
    every check has one)."""
    ok = passed(name, good)
    assert all(ok.values()), [c for c, v in ok.items() if not v]
    claims = set(ok)
    covered = {c for claim in wrong for c in claims if c.startswith(claim)}
    assert covered == claims, claims - covered
    for claim, mutate in wrong.items():
        after = passed(name, mutate(good))
        broken = [c for c, v in after.items() if not v]
        assert any(c.startswith(claim) for c in broken), (claim, broken)


def set_cell(data: pl.DataFrame, series: str, x: object, metric: str,
             value: float) -> pl.DataFrame:
    hit = (pl.col("series") == series) & (pl.col("x") == str(x))
    return data.with_columns(pl.when(hit).then(value).otherwise(pl.col(metric)).alias(metric))


# --- Fig. 10a: vs storage servers, Zipf 0.99 --------------------------------------

NETMC_10A = [0.30, 0.50, 0.62, 0.70, 0.75]  # the thesis' shape: sub-linear


def fig10a_good() -> pl.DataFrame:
    climc = scaled(NETMC_10A, [1 / 1.05, 1 / 1.19, 1 / 1.12, 1 / 1.08, 1 / 1.06])
    coord = [v / 1.9 for v in NETMC_10A]
    return table("netmc/fig10a", {"max_tput_rps": {
        "netmc": NETMC_10A, "climc": climc, "coordimc": coord}})


def test_fig10a_checks_hold_on_the_thesis_shape_and_each_fails_on_wrong_data() -> None:
    name = "netmc/fig10a"
    assert_each_check_fails_alone(name, fig10a_good(), {
        "NetMC >= CliMC": lambda d: set_cell(d, "climc", 4, "max_tput_rps", 0.71),
        "NetMC >= CoordiMC": lambda d: set_cell(d, "coordimc", 1, "max_tput_rps", 0.31),
        "NetMC / CliMC = 1.19 x": lambda d: set_cell(d, "climc", 2, "max_tput_rps", 0.45),
        "the gap is largest": lambda d: set_cell(d, "climc", 5, "max_tput_rps", 0.6),
        "NetMC / CoordiMC = 1.86 x": lambda d: d.with_columns(
            pl.when(pl.col("series") == "coordimc").then(pl.col("max_tput_rps") * 1.1)
            .otherwise(pl.col("max_tput_rps")).alias("max_tput_rps")),
        "NetMC does not scale linearly": lambda d: set_cell(d, "netmc", 5, "max_tput_rps", 1.4),
    })


# --- Fig. 13b: p99 near NetMC's saturation vs write ratio -------------------------


def fig13b_good() -> pl.DataFrame:
    netmc = [100e3, 80e3, 60e3, 40e3, 30e3, 20e3]
    climc = [400e3, 200e3, 100e3, 55e3, 35e3, 20.5e3]
    coord = [5e6, 5e6, 5e6, 5e6, 5e6, 4e6]
    served = [100e3, 110e3, 130e3, 160e3, 200e3, 300e3]
    return table("netmc/fig13b", {
        "p99_ns": {"netmc": netmc, "climc": climc, "coordimc": coord},
        "achieved_rps": {"netmc": [450e3] * 6, "climc": [450e3] * 6, "coordimc": served}})


def test_fig13b_checks_hold_on_the_thesis_shape_and_each_fails_on_wrong_data() -> None:
    assert_each_check_fails_alone("netmc/fig13b", fig13b_good(), {
        "NetMC's p99 is below": lambda d: set_cell(d, "netmc", 0.4, "p99_ns", 120e3),
        "with no writes": lambda d: set_cell(d, "netmc", 0, "p99_ns", 250e3),
        "the gap shrinks": lambda d: set_cell(d, "netmc", 0.8, "p99_ns", 10e3),
        "... and at 100%": lambda d: set_cell(d, "climc", 1.0, "p99_ns", 40e3),
        "CoordiMC cannot carry": lambda d: set_cell(d, "coordimc", 1.0, "achieved_rps", 400e3),
    })


# --- Figs. 14 and 15: vs key size and value size ----------------------------------


def falling(start: float, n: int, step: float) -> list[float]:
    return [start * (1 - step * i) for i in range(n)]


def test_fig14_checks_hold_on_the_thesis_shape_and_each_fail_on_wrong_data() -> None:
    good = table("netmc/fig14", {"max_tput_rps": {
        "netmc": [0.40, 0.40, 0.40, 0.39, 0.39], "climc": falling(0.36, 5, 0.02),
        "coordimc": falling(0.2, 5, 0.03)}})
    assert_each_check_fails_alone("netmc/fig14", good, {
        "NetMC >= CliMC": lambda d: set_cell(d, "climc", 16, "max_tput_rps", 0.41),
        "NetMC about flat": lambda d: set_cell(d, "netmc", 64, "max_tput_rps", 0.34),
        "CliMC degrades": lambda d: set_cell(d, "climc", 64, "max_tput_rps", 0.36),
        "CoordiMC degrades": lambda d: set_cell(d, "coordimc", 64, "max_tput_rps", 0.2),
    })


def p99_table(name: str, netmc: list[float], climc: list[float]) -> pl.DataFrame:
    n = len(netmc)
    return table(name, {
        "p99_ns": {"netmc": netmc, "climc": climc, "coordimc": [1e6] * n},
        "achieved_rps": {"netmc": [5e5] * n, "climc": [5e5] * n, "coordimc": [9e4] * n}})


def test_fig14b_checks_hold_on_the_thesis_shape_and_each_fail_on_wrong_data() -> None:
    good = p99_table("netmc/fig14b", [40e3, 40e3, 41e3, 42e3, 43e3],
                     [55e3, 60e3, 70e3, 80e3, 90e3])
    assert_each_check_fails_alone("netmc/fig14b", good, {
        "NetMC's p99 is below": lambda d: set_cell(d, "netmc", 16, "p99_ns", 75e3),
        "the p99 gap grows": lambda d: set_cell(d, "climc", 64, "p99_ns", 58e3),
        "... while NetMC's": lambda d: set_cell(d, "netmc", 64, "p99_ns", 50e3),
        "CoordiMC cannot carry": lambda d: set_cell(d, "coordimc", 32, "achieved_rps", 4.5e5),
    })


def test_fig15_checks_hold_on_the_thesis_shape_and_each_fail_on_wrong_data() -> None:
    good = table("netmc/fig15", {"max_tput_rps": {
        "netmc": [0.40] * 5, "climc": falling(0.36, 5, 0.05),
        "coordimc": falling(0.2, 5, 0.05)}})
    assert_each_check_fails_alone("netmc/fig15", good, {
        "NetMC >= CliMC": lambda d: set_cell(d, "climc", 128, "max_tput_rps", 0.45),
        "NetMC >= CoordiMC": lambda d: set_cell(d, "coordimc", 512, "max_tput_rps", 0.45),
        "CliMC's throughput falls": lambda d: set_cell(d, "climc", 1024, "max_tput_rps", 0.36),
        "CoordiMC's throughput falls": lambda d: set_cell(d, "coordimc", 1024,
                                                          "max_tput_rps", 0.2),
    })


def test_fig15b_checks_hold_on_the_thesis_shape_and_each_fail_on_wrong_data() -> None:
    good = p99_table("netmc/fig15b", [40e3, 41e3, 42e3, 45e3, 50e3],
                     [60e3, 70e3, 90e3, 120e3, 150e3])
    assert_each_check_fails_alone("netmc/fig15b", good, {
        "NetMC's p99 is below": lambda d: set_cell(d, "netmc", 128, "p99_ns", 75e3),
        "the p99 gap grows": lambda d: set_cell(d, "climc", 1024, "p99_ns", 65e3),
        "... and NetMC's p99 stays below half": lambda d: set_cell(d, "netmc", 1024,
                                                                   "p99_ns", 80e3),
        "CoordiMC cannot carry": lambda d: set_cell(d, "coordimc", 64, "achieved_rps", 4.5e5),
    })
