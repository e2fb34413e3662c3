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

Repeats (``repeat=N``, for targets with real packets): the whole search is run
N times, one after another, each an independent replicate steered by its own
measurements (``search_repeated``). The maximum is the median of the N
searches' maxima, with the distribution-free confidence interval of that
median (order statistics, ``CI_LEVEL`` or more). An interval from repeats of
one search's loads would miss what moves a maximum most on a noisy machine:
the path (one unlucky probe sends a search down to other loads) and the
moment (a minute of hypervisor steal). A load that several searches measured
is compared across them and flagged when they disagree (some pass, some fail,
or tails spread by more than ``slo.repeat_tolerance``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from netkv.config.schema import Slo
from netkv.targets.base import PointResult

Measure = Callable[[float, str], PointResult]
"""measure(offered_rps, phase) -> the load's measurement; phase is
'unloaded' or 'search'."""
RepeatMeasure = Callable[[int, float, str], PointResult]
"""measure(repeat, offered_rps, phase): the same for one of N searches."""

CI_LEVEL = 0.90  # the maximum's interval covers the median at least this often


@dataclass
class Evaluated:
    """One load: ``result`` stands for it (the repeat with the median tail),
    ``repeats`` are all its measurements, ``passed`` each one's own verdict."""

    phase: str
    result: PointResult
    slo_met: bool
    repeats: list[PointResult] = field(default_factory=list)
    passed: list[bool] = field(default_factory=list)
    agree: bool = True
    rate: float = math.nan          # the offered load asked for
    #: which search (repeat) measured each of ``repeats``; empty: 0, 1, ...
    repeat_ids: list[int] = field(default_factory=list)

    def ids(self) -> list[int]:
        return self.repeat_ids or list(range(len(self.repeats)))


@dataclass
class SearchOutcome:
    slo_ns: float   # the bound (independent searches: the median of theirs)
    unloaded: Evaluated
    points: list[Evaluated] = field(default_factory=list)
    bounds: list[float] = field(default_factory=list)  # per search (repeat)

    def bound(self, repeat: int) -> float:
        return self.bounds[repeat] if self.bounds else self.slo_ns

    @property
    def loads(self) -> list[Evaluated]:
        return [*self.points, self.unloaded]

    @property
    def repeat(self) -> int:
        return max([1, *(i + 1 for p in self.loads for i in p.ids())])

    @property
    def best(self) -> Evaluated | None:
        """The passing point with the highest achieved rate (search points
        first on ties), the unloaded point included."""
        passing = [p for p in self.loads if p.slo_met]
        return max(passing, key=lambda p: p.result.achieved_rps) if passing else None

    def best_repeat(self) -> tuple[Evaluated, int] | None:
        """The measurement that gives the run's maximum: with one repeat the
        best point's; with N, the one whose per-repeat maximum is the median
        of the N (the lower middle for even N)."""
        if self.repeat == 1:
            best = self.best
            return (best, 0) if best is not None else None
        maxima = self.repeat_maxima()
        order = sorted(range(len(maxima)), key=lambda i: maxima[i][0])
        rate, where = maxima[order[(len(order) - 1) // 2]]
        return where if rate > 0 else None

    def repeat_maxima(self) -> list[tuple[float, tuple[Evaluated, int] | None]]:
        """Per repeat (search): its highest achieved rate among the loads it
        passed by itself (0 and None when it passed none); the pair names the
        load and the position in its ``repeats``."""
        out: list[tuple[float, tuple[Evaluated, int] | None]] = []
        for i in range(self.repeat):
            top: tuple[float, tuple[Evaluated, int] | None] = (0.0, None)
            for p in self.loads:
                for j, rid in enumerate(p.ids()):
                    if rid == i and j < len(p.passed) and p.passed[j] and \
                            p.repeats[j].achieved_rps > top[0]:
                        top = (p.repeats[j].achieved_rps, (p, j))
            out.append(top)
        return out

    @property
    def max_throughput_rps(self) -> float:
        found = self.best_repeat()
        return found[0].repeats[found[1]].achieved_rps if found else 0.0

    def interval_rps(self) -> tuple[float, float, float]:
        """(low, high, level): the median maximum's confidence interval from
        the N per-repeat maxima; (nan, nan, nan) below 5 repeats (too few
        for a distribution-free interval at ``CI_LEVEL``)."""
        values = sorted(rate for rate, _ in self.repeat_maxima())
        k, level = median_ci_ranks(len(values))
        if k is None:
            return math.nan, math.nan, math.nan
        return values[k], values[len(values) - 1 - k], level

    @property
    def disagreeing(self) -> list[Evaluated]:
        return [p for p in self.loads if not p.agree]


def median_ci_ranks(n: int, level: float = CI_LEVEL) -> tuple[int | None, float]:
    """The largest k such that [x_(k), x_(n-1-k)] (0-based order statistics)
    covers the median with probability >= level, and that probability:
    1 - 2 P(Binomial(n, 1/2) <= k)."""
    best: tuple[int | None, float] = (None, math.nan)
    for k in range(n // 2):
        tail = sum(math.comb(n, j) for j in range(k + 1)) / 2**n
        cover = 1 - 2 * tail
        if cover < level:
            break
        best = (k, cover)
    return best


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


def evaluate(phase: str, measured: PointResult | Sequence[PointResult],
             slo_ns: float | Sequence[float], slo: Slo) -> Evaluated:
    """A load's verdict: the median tail within the bound and the median
    completion high enough (one measurement: ``passes``). ``slo_ns``: one
    bound, or one per measurement (repeats of independent searches, each
    under its own); tails are then compared as fractions of their bounds."""
    group = [measured] if isinstance(measured, PointResult) else list(measured)
    bounds = [float(slo_ns)] * len(group) if isinstance(slo_ns, (int, float)) else list(slo_ns)
    tails = [r.tail_ns(slo.percentile) / b for r, b in zip(group, bounds, strict=True)]
    passed = [passes(r, b, slo) for r, b in zip(group, bounds, strict=True)]
    by_tail = sorted(range(len(group)), key=lambda i: tails[i])
    mid = by_tail[(len(group) - 1) // 2]
    completion = sorted(r.completion for r in group)[(len(group) - 1) // 2]
    met = (all(r.issued > 0 for r in group) and completion >= slo.min_completion
           and math.isfinite(tails[mid]) and tails[mid] <= 1.0)
    finite = [t for t in tails if math.isfinite(t) and t > 0]
    spread = (max(finite) / min(finite) - 1) if len(finite) == len(tails) and finite else math.inf
    agree = len(group) == 1 or (len(set(passed)) == 1 and
                                (spread <= slo.repeat_tolerance or not any(passed)))
    return Evaluated(phase, group[mid], met, group, passed, agree)


def unloaded_bound_ns(unloaded: PointResult, slo: Slo) -> float:
    """The bound ``slo`` fixes from an unloaded measurement: ``p99_us``
    (fixed) or ``factor`` x its median (auto)."""
    if unloaded.completed == 0 or not math.isfinite(unloaded.latency_ns.get("p50", math.inf)):
        raise MeasurementError(
            f"the unloaded point ({unloaded.offered_rps:,.0f} req/s) completed "
            f"{unloaded.completed} of {unloaded.issued} requests: nothing to fix an SLO on"
        )
    if slo.kind == "fixed":
        assert slo.p99_us is not None
        return slo.p99_us * 1e3
    return slo.factor * unloaded.latency_ns["p50"]


def search_repeated(measure: RepeatMeasure, n: int, capacity_hint_rps: float, slo: Slo,
                    bound_of: Callable[[int], float | None] | None = None) -> SearchOutcome:
    """``n`` independent searches, one after another (repeat i measured by
    ``measure(i, offered_rps, phase)``), search i under ``bound_of(i)``
    (called just before it: e.g. a reference measured then) or, when that
    is None, the bound ``slo`` fixes from its own unloaded point. Their
    loads are grouped by offered rate (``Evaluated.repeat_ids`` says whose
    each measurement is), so a load several searches visited is judged by
    their median and flagged if they disagree."""
    if capacity_hint_rps <= 0:
        raise ValueError("capacity hint must be positive")
    searches = []
    for i in range(n):
        bound = bound_of(i) if bound_of is not None else None
        searches.append(search_throughput(lambda rate, phase, i=i: measure(i, rate, phase),
                                          capacity_hint_rps, slo, bound))
    bounds = [one.slo_ns for one in searches]
    by_rate: dict[float, list[tuple[int, Evaluated]]] = {}
    for i, one in enumerate(searches):
        for load in one.points:
            by_rate.setdefault(load.rate, []).append((i, load))

    def merged(phase: str, rate: float, items: list[tuple[int, Evaluated]]) -> Evaluated:
        group = [r for _, e in items for r in e.repeats]
        ids = [i for i, e in items for _ in e.repeats]
        out = evaluate(phase, group, [bounds[i] for i in ids], slo)
        out.rate, out.repeat_ids = rate, ids
        return out

    unloaded_rate = capacity_hint_rps * slo.unloaded_fraction
    return SearchOutcome(
        slo_ns=float(statistics.median(bounds)),
        unloaded=merged("unloaded", unloaded_rate, [(i, s.unloaded) for i, s in enumerate(searches)]),
        points=[merged("search", rate, items) for rate, items in by_rate.items()],
        bounds=bounds,
    )


def search_throughput(measure: Measure, capacity_hint_rps: float, slo: Slo,
                      slo_ns: float | None = None) -> SearchOutcome:
    """One search of the offered load. ``slo_ns``: an SLO fixed elsewhere
    (e.g. from a reference protocol's unloaded median); default: from ``slo``
    and the unloaded point."""
    if capacity_hint_rps <= 0:
        raise ValueError("capacity hint must be positive")
    unloaded_rate = capacity_hint_rps * slo.unloaded_fraction
    first = measure(unloaded_rate, "unloaded")
    if slo_ns is None:
        slo_ns = unloaded_bound_ns(first, slo)
    unloaded = evaluate("unloaded", first, slo_ns, slo)
    unloaded.rate = unloaded_rate
    outcome = SearchOutcome(slo_ns=slo_ns, unloaded=unloaded)

    budget = slo.max_points

    def probe(rate: float) -> bool:
        nonlocal budget
        budget -= 1
        point = evaluate("search", measure(rate, "search"), slo_ns, slo)
        point.rate = rate
        outcome.points.append(point)
        return point.slo_met

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
