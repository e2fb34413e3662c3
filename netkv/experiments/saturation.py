"""The saturated throughput measured at saturation (an experiment's
``saturate: true``).

``sat_tput_rps`` of a point is fluid: the offered load at which the busiest
server reaches its capacity *at that point's per-server mix*. When the mix
changes with the load (a cache that overflows to the servers past some rate,
e.g. StarCache's loop serving each key at most once per pass), the fluid
bound taken below that rate overstates the saturation. This search measures
points at the bound itself: a load L is sustainable when the bound computed
from L's own mix is at least L (the busiest server below its capacity at L)
and every request was answered; starting from the fluid bound of the SLO
search's best point, bisect between that point's load (sustainable) and
the first unsustainable one.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any, NamedTuple

from rich.console import Console

from netkv.config.schema import RunConfig
from netkv.sim.workload_cache import WorkloadCache

MAX_PROBES = 5


class Saturation(NamedTuple):
    rps: float                    # the largest sustainable offered load found
    probes: int                   # points measured
    # the point row measured at ``rps`` (None: no probe was sustainable, so
    # ``rps`` is the floor, whose row the caller has)
    row: dict[str, Any] | None


def sustainable(offered_rps: float, sat_rps: float, completion: float,
                min_completion: float, precision: float) -> bool:
    """Whether a point at ``offered_rps`` keeps every server below its
    capacity (within ``precision``, the SLO search's) and answered (nearly)
    everything."""
    return sat_rps >= offered_rps * (1.0 - precision) and completion >= min_completion


def saturation_rps(cfg: RunConfig, out_dir: Path, argv: list[str], floor_rps: float,
                   bound_rps: float, workloads: WorkloadCache | None = None) -> Saturation:
    """The largest sustainable offered load between ``floor_rps`` (a load
    known sustainable: the SLO search's best) and ``bound_rps`` (its fluid
    bound), how many points it measured (each under out_dir/sat-<i>;
    ``workloads``: the cell's, so a probe builds no workload again) and the
    point measured there."""
    from netkv.runner import execute_at

    def probe(load_rps: float, i: int) -> tuple[bool, float, dict[str, Any]]:
        points = execute_at(cfg, out_dir / f"sat-{i}", argv, Console(file=io.StringIO()),
                            load_rps, math.inf, workloads=workloads)
        row = points.row(0, named=True)
        sat = float(row.get("sat_tput_rps") or math.nan)
        return sustainable(load_rps, sat, float(row["completion"]), cfg.slo.min_completion,
                           cfg.slo.precision), sat, row

    if not (bound_rps > floor_rps > 0.0):
        return Saturation(floor_rps, 0, None)
    ok, sat, row = probe(bound_rps, 0)
    if ok:
        return Saturation(bound_rps, 1, row)
    lo, hi, n = floor_rps, bound_rps, 1
    at_lo: dict[str, Any] | None = None
    # first guess: the bound of the failed point's own (worse) mix, when it
    # lies inside; then halve the bracket
    guess = sat if lo < sat < hi else 0.5 * (lo + hi)
    while n < MAX_PROBES and hi - lo > cfg.slo.precision * hi:
        ok, _, row = probe(guess, n)
        if ok:
            lo, at_lo = guess, row
        else:
            hi = guess
        guess = 0.5 * (lo + hi)
        n += 1
    return Saturation(lo, n, at_lo)
