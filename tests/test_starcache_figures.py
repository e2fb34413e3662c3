"""StarCache's figure checks (experiments/starcache/fig9-fig18) on the values
this machine measured (docs/starcache.md), and each
check failing on wrong data: a check that cannot fail would prove nothing.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from netkv.experiments.checks import evaluate
from netkv.experiments.spec import (Check, Experiment, Metric, experiments_root,
                                    load_experiment)
from netkv.sim.engine import zipf_probabilities

Cells = dict[tuple[str, str], dict[str, float]]


def table(cells: Cells) -> pl.DataFrame:
    rows = [{"series": s, "x": x, **m} for (s, x), m in cells.items()]
    return pl.DataFrame(rows)


def verdicts(fig: str, cells: Cells) -> list[str]:
    exp = load_experiment(f"starcache/{fig}")
    t = table(cells)
    return [evaluate(c, t, exp).verdict for c in exp.checks]


LOADS = ["500000", "1000000", "1500000", "3000000"]
FIG11 = {  # p50 us, p99 us, saturated Mreq/s per load (10 M keys, equal hash ranges)
    "starcache": ([8.05, 8.18, 8.35, 9.06], [28.6, 30.0, 31.6, 38.3], [8.09, 7.87, 8.20, 8.00]),
    "netcache": ([8.80, 9.06, 9.31, 10.5], [29.6, 31.8, 33.9, 46.7], [4.37, 4.35, 4.35, 4.37]),
    "nocache": ([9.57, 9.95, 10.5, 12.6], [31.2, 34.9, 45.2, float("inf")],
                [2.12, 2.12, 2.13, 2.41]),
}


def fig11_cells(data: dict[str, tuple[list[float], list[float], list[float]]]) -> Cells:
    return {(s, x): {"p50_ns": p50[i] * 1e3, "p99_ns": p99[i] * 1e3,
                     "sat_tput_rps": sat[i] * 1e6}
            for s, (p50, p99, sat) in data.items() for i, x in enumerate(LOADS)}


def test_fig11_checks_hold_on_the_measured_values_and_fail_on_swapped_series() -> None:
    # NetCache's finite p99 at 3 M orders below NoCache's unbounded one
    assert verdicts("fig11", fig11_cells(FIG11)) == ["holds"] * 6
    # NoCache's numbers as StarCache's and the other way round: every order breaks
    wrong = {"starcache": FIG11["nocache"], "netcache": FIG11["netcache"],
             "nocache": FIG11["starcache"]}
    assert verdicts("fig11", fig11_cells(wrong)) == ["FAIL"] * 6


def test_fig13_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    xs = ["16", "32", "64"]
    # 10 M keys, hash partitions, saturated throughput (reproduce
    # starcache/fig13, seed 1)
    measured = {"starcache": [7.70, 7.50, 7.51], "netcache": [4.41, 2.76, 2.73],
                "nocache": [2.13, 2.67, 2.67]}
    # NoCache's "falls" differs (declared, notes); the rest holds
    assert verdicts("fig13", sat_cells(measured, xs)) == ["holds", "holds", "differs",
                                                          "holds", "holds"]
    # the max under SLO (before): StarCache flat, its "falls" now fails
    under_slo = {"starcache": [4.27, 4.27, 4.27], "netcache": [3.04, 1.96, 1.96],
                 "nocache": [1.52, 1.88, 1.88]}
    assert verdicts("fig13", sat_cells(under_slo, xs))[0] == "FAIL"
    falling = {"starcache": [4.0, 3.9, 3.8], "netcache": [1.8, 1.7, 1.6],
               "nocache": [1.6, 1.5, 1.4]}
    assert verdicts("fig13", sat_cells(falling, xs)) == ["holds"] * 5
    worst = {"starcache": [1.0, 1.0, 1.0], "netcache": [1.8, 1.8, 1.8],
             "nocache": [1.5, 1.5, 1.5]}
    assert verdicts("fig13", sat_cells(worst, xs)) == ["FAIL", "FAIL", "differs",
                                                       "FAIL", "FAIL"]


def test_fig13b_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    xs = ["64", "256", "1024"]
    # 10 M keys, hash partitions, measured at saturation (reproduce
    # starcache/fig13b, seed 1)
    measured = {"starcache": [8.07, 8.11, 7.30], "netcache": [16.3, 2.14, 2.16],
                "nocache": [2.14, 2.14, 2.16]}
    assert verdicts("fig13b", sat_cells(measured, xs)) == \
        ["holds", "holds", "differs", "holds", "holds"]
    # the fluid bound of the SLO search's best point: no fall for StarCache
    fluid = dict(measured, starcache=[8.07, 8.11, 8.11])
    assert verdicts("fig13b", sat_cells(fluid, xs))[0] == "FAIL"
    # rising with size, StarCache behind NetCache above 64 B, ahead at 64 B
    wrong = {"starcache": [3.0, 1.0, 3.2], "netcache": [2.0, 2.0, 2.1],
             "nocache": [1.5, 1.5, 1.6]}
    assert verdicts("fig13b", sat_cells(wrong, xs)) == \
        ["FAIL", "FAIL", "differs", "FAIL", "FAIL"]
    assert load_experiment("starcache/fig13b").saturate


def sat_cells(data: dict[str, list[float]], xs: list[str]) -> Cells:
    return {(s, x): {"sat_tput_rps": v[i] * 1e6} for s, v in data.items()
            for i, x in enumerate(xs)}


def moM_cells(data: dict[str, list[float]], xs: list[str]) -> Cells:
    """Balancing efficiency at saturation (figs. 10, 14 and 17 read it there)."""
    return {(s, x): {"min_over_max_at_sat": v[i]} for s, v in data.items()
            for i, x in enumerate(xs)}


def test_fig14_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    xs = ["9", "18", "36"]
    measured = {"starcache": [0.871, 0.843, 0.706], "nocache": [0.543, 0.381, 0.216],
                "uniform": [0.988, 0.977, 0.975]}
    assert verdicts("fig14", moM_cells(measured, xs)) == ["differs", "holds", "holds"]
    assert verdicts("fig14", moM_cells({"starcache": [0.9] * 3, "nocache": [0.5] * 3,
                                        "uniform": [0.95] * 3}, xs)) == ["holds"] * 3
    wrong = {"starcache": [0.5] * 3, "nocache": [0.6] * 3, "uniform": [0.4] * 3}
    assert verdicts("fig14", moM_cells(wrong, xs)) == ["differs", "FAIL", "FAIL"]



def test_fig17_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    xs = ["1", "2", "3", "4"]
    # 10 M keys at saturation (reproduce starcache/fig17, seed 1): no drop
    assert verdicts("fig17", moM_cells({"starcache": [0.585, 0.665, 0.668, 0.598]}, xs)) == \
        ["differs", "differs", "holds"]
    # at the max under SLO (before) the drop held
    assert verdicts("fig17", moM_cells({"starcache": [0.735, 0.675, 0.672, 0.610]}, xs)) == \
        ["differs", "holds", "holds"]
    # a 31% drop (1 M keys' figure) fails "slightly", no longer declared
    assert verdicts("fig17", moM_cells({"starcache": [0.656, 0.597, 0.455, 0.452]}, xs)) == \
        ["differs", "holds", "FAIL"]
    assert verdicts("fig17", moM_cells({"starcache": [0.9, 0.88, 0.87, 0.85]}, xs)) == \
        ["holds"] * 3
    # rising with the packets: the drop differs (declared), "slightly" (+80%) fails
    assert verdicts("fig17", moM_cells({"starcache": [0.5, 0.6, 0.7, 0.9]}, xs))[1:] == \
        ["differs", "FAIL"]


def residue_balance(keys: int, alpha: float, cached: int, servers: int, placements: int,
                    seed: int = 1) -> np.ndarray:
    """min / max server load of the reads a cache of the `cached` hottest
    keys leaves to `servers` servers, keys placed at random (hash
    partitions), over `placements` placements."""
    p = zipf_probabilities(keys, alpha) if alpha > 0 else np.full(keys, 1.0 / keys)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(placements):
        load = np.bincount(rng.integers(0, servers, keys)[cached:], weights=p[cached:],
                           minlength=servers)
        out.append(load.min() / load.max())
    return np.array(out)


def test_fig10_runs_the_papers_10m_keys_whose_hot_share_1m_overstates() -> None:
    """Figs. 9 (gain), 10 and 14 (balance) run the paper's 10 M keys: with 1 M (fig9.yaml's scaling,
    justified there as the hottest keys' shares agreeing "within 4%") the 32
    cached keys draw 17% more of the reads, and the uncached residue that
    sets the balance is more uneven."""
    for fig in ("fig9", "fig10", "fig14"):
        exp = load_experiment(f"starcache/{fig}")
        assert "keys=10000000" in exp.overrides, (fig, exp.overrides)
    top = {n: float(zipf_probabilities(n, 0.99)[:32].sum()) for n in (1_000_000, 10_000_000)}
    assert 1.15 < top[1_000_000] / top[10_000_000] < 1.2, top


def test_fig10_residue_alone_keeps_starcache_below_08() -> None:
    """The declared miss is the workload's: 10 M Zipf-0.99 keys placed at
    random on 36 servers, the 32 hottest taken away, give min/max below 0.8
    in every placement (0.64-0.76); uniform keys, or a cache so large that
    nothing hot is left, give above it (the check can fail)."""
    skew = residue_balance(10_000_000, 0.99, 32, 36, 20)
    assert skew.max() < 0.8 and 0.6 < float(np.median(skew)) < 0.8, skew
    assert residue_balance(1_000_000, 0.0, 32, 36, 5).min() > 0.95
    assert residue_balance(1_000_000, 0.99, 100_000, 36, 5).min() > 0.8


def test_fig10_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    cells = {("starcache", "0.99"): {"min_over_max_at_sat": 0.706},
             ("nocache", "0.99"): {"min_over_max_at_sat": 0.216},
             ("netcache", "0.99"): {"min_over_max_at_sat": 0.411}}
    assert verdicts("fig10", cells) == ["differs", "holds", "holds"]
    # the balance at the SLO's best point is not what the checks read
    at_slo = {k: {"min_over_max": 0.9} for k in cells}
    assert verdicts("fig10", at_slo) == ["FAIL"] * 3
    wrong = {k: {"min_over_max_at_sat": v} for k, v in (
        (("starcache", "0.99"), 0.9), (("nocache", "0.99"), 0.7), (("netcache", "0.99"), 0.6))}
    assert verdicts("fig10", wrong) == ["holds", "FAIL", "FAIL"]


def test_gain_and_balance_figures_place_keys_by_hash_partitions() -> None:
    """Figs. 9, 10 and 14 place keys by equal hash ranges, the paper's
    hash-mod partitions (digest section 2): consistent hashing with 16
    virtual nodes gives 36 servers uneven key ranges (fig9 at uniform load:
    2.76 against 3.15 Mreq/s), a model of neither."""
    for fig in ("fig9", "fig10", "fig14"):
        for name, ov in load_experiment(f"starcache/{fig}").series.items():
            assert "protocol.ring=equal_ranges" in ov, (fig, name, ov)


def test_fig9_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    """10 M keys, hash partitions, saturated throughput, StarCache's measured
    at saturation (reproduce starcache/fig9, seed 1)."""
    xs = ["0", "0.9", "0.95", "0.99"]
    measured = {"starcache": [7.07, 7.50, 7.65, 7.70], "netcache": [7.08, 5.75, 5.00, 4.41],
                "nocache": [7.07, 3.52, 2.68, 2.13]}
    assert verdicts("fig9", sat_cells(measured, xs)) == ["holds", "holds", "holds"]
    # the max under the p99 SLO (before): StarCache rises 1.36 x with skew,
    # which "roughly flat" (within 15%) refuses, no longer declared
    under_slo = {"starcache": [3.15, 3.55, 3.99, 4.27], "netcache": [3.15, 3.38, 3.27, 3.04],
                 "nocache": [3.15, 2.53, 1.91, 1.52]}
    assert verdicts("fig9", sat_cells(under_slo, xs)) == ["holds", "holds", "FAIL"]
    # a NetCache as good as StarCache, a NoCache at 80% of it, a flat StarCache
    wrong = {"starcache": [3.15, 3.2, 3.3, 3.4], "netcache": [3.15, 3.3, 3.3, 3.3],
             "nocache": [3.15, 3.0, 2.9, 2.8]}
    assert verdicts("fig9", sat_cells(wrong, xs)) == ["FAIL", "FAIL", "holds"]


def test_fig9_plots_the_saturated_throughput() -> None:
    """The paper's throughput is the saturated one (no latency bound in its
    evaluation; "saturated throughput", seed line 289), so fig9's checks read
    sat_tput_rps, not the max under the figure's SLO."""
    exp = load_experiment("starcache/fig9")
    assert exp.y.metric == "sat_tput_rps"
    assert all(c.left.metric in (None, "sat_tput_rps") for c in exp.checks)


def throughput_metrics(exp: Experiment) -> set[str]:
    """The throughput metrics a figure plots or checks."""
    refs = [r for c in exp.checks if isinstance(c, Check) for r in (c.left, c.right)]
    return {exp.y.metric, *(r.metric for r in refs if r.metric)} & {"max_tput_rps",
                                                                     "sat_tput_rps"}


def test_every_starcache_throughput_figure_plots_the_saturated_one() -> None:
    """One throughput definition across the StarCache figures: the paper's
    saturated throughput (seed lines 256, 289), never the max under an SLO."""
    grids = [load_experiment(f"starcache/{p.stem}")
             for p in sorted((experiments_root() / "starcache").glob("*.yaml"))]
    plotted = {e.description.split(":")[0]: throughput_metrics(e) for e in grids
               if e.kind == "grid"}
    assert all("max_tput_rps" not in m for m in plotted.values()), plotted
    assert sum(bool(m) for m in plotted.values()) >= 6  # fig9, 11, 12, 13, 13b, 15, 18
    # fig12 as it was (the max under its SLO) is caught
    old = load_experiment("starcache/fig12").model_copy(
        update={"y": Metric(metric="max_tput_rps")})
    assert "max_tput_rps" in throughput_metrics(old)


def test_fig12_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    """10 M keys, hash partitions, saturated throughput (reproduce
    starcache/fig12, seed 1)."""
    xs = ["0", "0.25", "0.5", "1.0"]
    measured = {"starcache": [7.70, 2.12, 2.19, 2.14], "nocache": [2.13, 2.13, 2.14, 2.13],
                "netcache": [4.41, 2.14, 2.21, 2.13]}
    # 25% -> 50% is flat at NoCache's level (declared, notes)
    assert verdicts("fig12", sat_cells(measured, xs)) == ["holds", "holds", "differs", "holds"]
    # the max under SLO (before): all four held
    under_slo = {"starcache": [4.27, 2.00, 1.68, 1.52], "nocache": [1.52, 1.52, 1.50, 1.52],
                 "netcache": [3.04, 1.80, 1.63, 1.52]}
    assert verdicts("fig12", sat_cells(under_slo, xs)) == ["holds"] * 4
    # a StarCache that rises with writes and ends 20% above NoCache
    wrong = {**measured, "starcache": [1.6, 1.7, 1.8, 2.6]}
    assert verdicts("fig12", sat_cells(wrong, xs)) == ["FAIL", "FAIL", "differs", "FAIL"]
    exp = load_experiment("starcache/fig12")
    assert exp.y.metric == "sat_tput_rps" and exp.saturates("starcache")


def test_fig16_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    """10 M keys, hash partitions (reproduce starcache/fig16, seed 1)."""
    xs = ["500000", "1000000", "1500000"]
    us = {  # switch p50, switch p99, server p50 per load
        "starcache": ([4.21, 4.24, 4.27], [5.90, 6.74, 7.25], [9.44, 9.63, 9.89]),
        "netcache": ([2.59, 2.59, 2.59], [2.84, 2.92, 2.94], [9.50, 9.76, 10.08]),
    }

    def cells(d: dict[str, tuple[list[float], list[float], list[float]]]) -> Cells:
        return {(s, x): {"switch_p50_ns": a[i] * 1e3, "switch_p99_ns": b[i] * 1e3,
                         "server_p50_ns": c[i] * 1e3}
                for s, (a, b, c) in d.items() for i, x in enumerate(xs)}
    assert verdicts("fig16", cells(us)) == ["holds"] * 5
    # the two schemes swapped: the orders break
    wrong = {"starcache": us["netcache"], "netcache": us["starcache"]}
    assert verdicts("fig16", cells(wrong)) == ["FAIL", "holds", "holds", "FAIL", "FAIL"]
    # StarCache's parked reads 4 us slower, its servers 30% slower
    slow = {**us, "starcache": ([6.6, 6.6, 6.6], us["starcache"][1], [12.3, 12.5, 12.9])}
    assert verdicts("fig16", cells(slow)) == ["holds", "FAIL", "FAIL", "holds", "holds"]


def test_fig18_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    """10 M keys, hash partitions, saturated throughput (reproduce
    starcache/fig18, seed 1)."""
    xs = ["0", "25", "50", "75", "100"]
    measured = {"starcache": [7.30, 8.11, 8.11, 8.11, 8.07],
                "netcache": [2.16, 4.51, 4.70, 7.48, 16.3],
                "nocache": [2.16, 2.14, 2.14, 2.14, 2.14]}
    # NetCache behind at 75% (declared, notes)
    assert verdicts("fig18", sat_cells(measured, xs)) == ["holds", "differs"]
    # the max under SLO (before): both held
    under_slo = {"starcache": [4.05, 4.05, 4.05, 4.05, 4.11],
                 "netcache": [1.43, 3.04, 3.38, 5.63, 8.55],
                 "nocache": [1.43, 1.50, 1.50, 1.50, 1.50]}
    assert verdicts("fig18", sat_cells(under_slo, xs)) == ["holds", "holds"]
    # the crossing at or below 25%; a StarCache ahead everywhere
    early = {**measured, "netcache": [2.16, 8.5, 8.6, 8.7, 16.3]}
    late = {**measured, "netcache": [2.16, 4.51, 4.70, 7.48, 7.9]}
    assert verdicts("fig18", sat_cells(early, xs)) == ["FAIL", "holds"]
    assert verdicts("fig18", sat_cells(late, xs)) == ["holds", "differs"]
    # NetCache ahead from 75% on, as the paper: the declared check holds again
    ahead = {**measured, "netcache": [2.16, 4.51, 4.70, 8.5, 16.3]}
    assert verdicts("fig18", sat_cells(ahead, xs)) == ["holds", "holds"]
    exp = load_experiment("starcache/fig18")
    assert exp.y.metric == "sat_tput_rps" and exp.saturates("starcache")


def test_fig15_and_15b_checks_on_the_measured_values_and_on_wrong_ones() -> None:
    """10 M keys, hash partitions (reproduce starcache/fig15 and fig15b, seed 1)."""
    sizes = ["8", "16", "32", "64", "128", "256"]
    # saturated throughput, measured at saturation
    measured = {"starcache": [6.42, 7.09, 7.72, 5.15, 3.69, 2.38]}
    assert verdicts("fig15", sat_cells(measured, sizes)) == ["holds"] * 5
    # best at 64 instead: only that comparison breaks
    wrong = {"starcache": [6.42, 7.09, 7.72, 8.2, 3.69, 2.38]}
    assert verdicts("fig15", sat_cells(wrong, sizes)) == ["holds"] * 2 + ["FAIL"] + ["holds"] * 2
    # still rising past 32 (no saturation at 16-32): every comparison but 8's and 16's
    rising = {"starcache": [6.42, 7.09, 7.72, 8.5, 9.0, 9.5]}
    assert verdicts("fig15", sat_cells(rising, sizes)) == ["holds"] * 2 + ["FAIL"] * 3
    exp = load_experiment("starcache/fig15")
    assert exp.y.metric == "sat_tput_rps" and exp.saturates("starcache")

    def overflow(v: list[float]) -> Cells:
        return {("starcache", x): {"overflow_ratio_at_sat": r} for x, r in zip(sizes, v)}
    # at each size's saturation: two claims differ (declared)
    assert verdicts("fig15b", overflow([0, 0, 0.031, 0.0675, 0.1054, 0.121])) == \
        ["holds", "differs", "holds", "differs", "holds", "holds"]
    # at one fixed 4.27 M (before) all held
    assert verdicts("fig15b", overflow([0, 0, 0, 0.039, 0.128, 0.204])) == ["holds"] * 6
    # overflow at 16, none at 64, falling beyond: every undeclared claim fails
    got = verdicts("fig15b", overflow([0, 0.02, 0.02, 0.005, 0.004, 0.003]))
    assert [got[i] for i in (0, 2, 4, 5)] == ["FAIL"] * 4, got
    # fig15b reads fig15's runs at saturation
    b = load_experiment("starcache/fig15b")
    assert b.y.metric == "overflow_ratio_at_sat" and b.saturates("starcache")
    assert (b.overrides, b.series, b.x.values) == (exp.overrides, exp.series, exp.x.values)


def rack_shares(servers: int, cached: tuple[int, ...]) -> list[np.ndarray]:
    """Exact share of all reads each server gets (fig10's workload, seed 1's
    placement by equal hash ranges) with no cache, then with each `cached`
    count of the hottest keys taken away."""
    from netkv.config.compose import load
    from netkv.sim.engine import Workload

    wl = Workload.from_config(load([
        f"servers={servers}", "keys=10000000", "alpha=0.99", "workload.key_size=16",
        "protocol=starcache", "protocol.ring=equal_ranges",
        "workload.value_size=[{size:64,weight:12},{size:1024,weight:88}]"]))
    home = wl.rank_info()["home"].astype(np.int64)
    p = wl.probabilities()
    return [np.bincount(home[c:], weights=p[c:], minlength=servers) for c in (0, *cached)]


def test_fig10_measures_the_workloads_exact_residue() -> None:
    """The measured 0.738 / 0.209 is this placement's exact expected balance
    (no window noise, no simulator effect); 0.8 needs ~128 keys cached, past
    the loop's knee (fig15); and measuring above saturation with capped
    servers (the artifact's LIMIT_RPS) would balance NoCache better than
    StarCache, against the paper's Fig. 10: not its operating point."""
    whole, residue, big = rack_shares(36, (32, 128))
    assert abs(residue.min() / residue.max() - 0.738) < 0.005
    assert abs(whole.min() / whole.max() - 0.209) < 0.005
    assert big.min() / big.max() > 0.8
    offered = 1.2 * 36  # 1.2 x the servers' capacity (1 each), capped at 1
    eff = {name: np.minimum(s * offered, 1.0).min() / np.minimum(s * offered, 1.0).max()
           for name, s in (("nocache", whole), ("starcache", residue))}
    assert eff["nocache"] > eff["starcache"], eff


def test_fig19_runs_at_saturation_and_checks_cache_size_and_overflow() -> None:
    """reproduce starcache/fig19 (seed 1): the long run at 80% of the
    saturated throughput; its cache size and overflow checked on the run's
    values, and failing on wrong ones."""
    from netkv.experiments.checks import evaluate_timeline
    from netkv.experiments.spec import RunCheck

    exp = load_experiment("starcache/fig19")
    assert exp.timeline is not None and exp.timeline.saturate
    runs = [c for c in exp.checks if isinstance(c, RunCheck)]

    def run_verdicts(cache_max: float, overflow: float) -> list[str]:
        results = pl.DataFrame([{"series": "starcache", "x": "swap",
                                 "cache_size_max": cache_max, "overflow_ratio": overflow}])
        return [evaluate_timeline(c, results, pl.DataFrame(), exp).verdict for c in runs]
    assert run_verdicts(36, 0.00118) == ["holds", "differs"]
    assert run_verdicts(36, 0.0004) == ["holds", "holds"]
    # 80% of the max under SLO (before): the cache grew to 61
    assert run_verdicts(61, 0.00027) == ["FAIL", "holds"]


def test_every_starcache_balance_or_overflow_figure_reads_it_at_saturation() -> None:
    """The paper's balance (Figs. 10, 14, 17) and overflow (15b) come from
    the runs whose throughput is the saturated one: each reads its metric
    at saturation (<metric>_at_sat), never at the SLO's best point."""
    read = {}
    for p in sorted((experiments_root() / "starcache").glob("*.yaml")):
        exp = load_experiment(f"starcache/{p.stem}")
        if exp.kind == "grid" and exp.y.metric.removesuffix("_at_sat") in (
                "min_over_max", "overflow_ratio"):
            read[p.stem] = exp.y.metric
    assert set(read) == {"fig10", "fig14", "fig15b", "fig17"}, read
    assert all(m.endswith("_at_sat") for m in read.values()), read
