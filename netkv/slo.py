"""Throughput under a tail-latency SLO: the load search every target uses.

1. Measure an unloaded point (a small fraction of the capacity hint) and fix
   the SLO: ``factor`` x its median (auto, Pegasus' 5x), or a fixed bound.
2. Find the knee: raise the offered load geometrically from below until a
   point fails (p99 > SLO or completion < min_completion).
3. Bisect between the last passing and the first failing load until they
   are within ``precision`` of each other (as mutilate's --search does).

The answer is the highest *achieved* throughput among passing points,
the unloaded point included. A passing unloaded point is also a floor for
step 2: the search never probes below a load already seen to pass. Latency
need not fall with load on a real target (on a small VM a quiet flow pays a
process wakeup per packet, so a few hundred req/s can have a worse p99 than a
few thousand); without the floor one failing probe sent the search down to
loads where nothing passes. The search is deterministic: the same measurements give the same sequence of
offered loads, which is what lets an interrupted run resume from cached points.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from netkv.config.schema import Slo
from netkv.targets.base import PointResult

Measure = Callable[[float, str], PointResult]
"""measure(offered_rps, phase) -> PointResult; phase is 'unloaded' or 'search'."""


@dataclass
class Evaluated:
    phase: str
    result: PointResult
    slo_met: bool


@dataclass
class SearchOutcome:
    slo_ns: float
    unloaded: Evaluated
    points: list[Evaluated] = field(default_factory=list)

    @property
    def best(self) -> Evaluated | None:
        """The passing point with the highest achieved rate (search points
        first on ties), the unloaded point included."""
        passing = [p for p in (*self.points, self.unloaded) if p.slo_met]
        return max(passing, key=lambda p: p.result.achieved_rps) if passing else None

    @property
    def max_throughput_rps(self) -> float:
        best = self.best
        return best.result.achieved_rps if best else 0.0


def latency_key(percentile: float) -> str:
    """'p99' for 99.0, 'p999' for 99.9, 'p50' for 50."""
    text = f"{percentile:g}".replace(".", "")
    return f"p{text}"


KNEE_FLOOR = 1e-3  # the search gives up below this fraction of the capacity hint


class MeasurementError(RuntimeError):
    """A load point measured nothing usable (no request issued or completed)."""


def passes(result: PointResult, slo_ns: float, slo: Slo) -> bool:
    """The tail at ``slo.percentile`` (any, from the histogram) over every
    issued request, unfinished ones infinitely slow, within the bound; and
    enough of them completed."""
    tail = result.tail_ns(slo.percentile)
    return (result.issued > 0 and result.completion >= slo.min_completion
            and math.isfinite(tail) and tail <= slo_ns)


def search_throughput(measure: Measure, capacity_hint_rps: float, slo: Slo,
                      slo_ns: float | None = None) -> SearchOutcome:
    """Search the offered load. ``slo_ns``: an SLO fixed elsewhere (e.g. from
    a reference protocol's unloaded median); default: from ``slo``."""
    if capacity_hint_rps <= 0:
        raise ValueError("capacity hint must be positive")
    unloaded_rate = capacity_hint_rps * slo.unloaded_fraction
    unloaded = measure(unloaded_rate, "unloaded")
    if unloaded.completed == 0 or not math.isfinite(unloaded.latency_ns.get("p50", math.inf)):
        raise MeasurementError(
            f"the unloaded point ({unloaded_rate:,.0f} req/s) completed "
            f"{unloaded.completed} of {unloaded.issued} requests: nothing to fix an SLO on"
        )
    if slo_ns is not None:
        pass
    elif slo.kind == "fixed":
        assert slo.p99_us is not None
        slo_ns = slo.p99_us * 1e3
    else:
        slo_ns = slo.factor * unloaded.latency_ns["p50"]
    outcome = SearchOutcome(slo_ns=slo_ns, unloaded=Evaluated("unloaded", unloaded, True))
    outcome.unloaded.slo_met = passes(unloaded, slo_ns, slo)

    budget = slo.max_points

    def probe(rate: float) -> bool:
        nonlocal budget
        budget -= 1
        result = measure(rate, "search")
        ok = passes(result, slo_ns, slo)
        outcome.points.append(Evaluated("search", result, ok))
        return ok

    # Knee: start at a quarter of the hint and move by 2x until the outcome flips.
    floor = unloaded_rate if outcome.unloaded.slo_met else 0.0
    rate = capacity_hint_rps / 4
    lo, hi = 0.0, 0.0
    if probe(rate):
        lo = rate
        while budget > 0:
            rate *= 2
            if not probe(rate):
                hi = rate
                break
            lo = rate
        else:
            return outcome
    else:
        hi = rate
        # A hot key pinned to one core can cap the rack far below the hint.
        while budget > 0 and rate > capacity_hint_rps * KNEE_FLOOR:
            rate /= 2
            if rate <= floor:  # known to pass: bisect from there
                lo = floor
                break
            if probe(rate):
                lo = rate
                break
            hi = rate
        if lo == 0.0:
            return outcome
    while budget > 0 and (hi - lo) / hi > slo.precision:
        mid = (lo + hi) / 2
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return outcome
