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
