"""The load search finds the analytic knee of a queue within its precision."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netkv.config.schema import Slo
from netkv.quantile import histogram, latency_summary, quantiles
from netkv.slo import latency_key, passes, search_throughput
from netkv.targets.base import PointResult

MU = 200_000.0  # service rate of an M/M/1 queue, req/s


SAMPLES = 20_000


def point(rate: float, latencies_ns: np.ndarray, completed: int | None = None) -> PointResult:
    """A point whose histogram holds ``latencies_ns`` (as a target fills it)."""
    lower, counts = histogram(latencies_ns)
    issued = SAMPLES
    done = SAMPLES if completed is None else completed
    lost = issued - done
    return PointResult(offered_rps=rate, duration_s=SAMPLES / max(rate, 1.0), issued=issued,
                       completed=done, dropped=lost, timeouts=0,
                       latency_ns=latency_summary(lower, counts, lost,
                                                  float(np.mean(latencies_ns))),
                       server_requests=np.array([done]), hist_lower_ns=lower,
                       hist_counts=counts)


def mm1_latencies(rate: float) -> np.ndarray:
    """M/M/1 sojourn times (exponential with rate mu - lambda) at evenly
    spaced probabilities: their quantiles are the exact ones, no noise."""
    u = (np.arange(SAMPLES) + 0.5) / SAMPLES
    return 1e9 / (MU - rate) * -np.log1p(-u)


def mm1_point(rate: float, phase: str) -> PointResult:
    """Exact M/M/1 sojourn-time quantiles; past mu, 5% never complete.

    Its p99/p50 is ln(100)/ln(2) = 6.6 even unloaded, so the tests use a 20x SLO.
    """
    del phase
    if rate >= MU:
        return point(MU, mm1_latencies(MU * 0.999)[: int(SAMPLES * 0.95)],
                     completed=int(SAMPLES * 0.95))
    return point(rate, mm1_latencies(rate))


def slo(**kw) -> Slo:
    base = dict(kind="auto", factor=20.0, precision=0.02, unloaded_fraction=0.05, max_points=30)
    return Slo(**{**base, **kw})


def analytic_max_rate(slo_ns: float) -> float:
    # p99(lambda) = ln(100) / (mu - lambda) <= slo  =>  lambda <= mu - ln(100)/slo
    return MU - math.log(100) / (slo_ns / 1e9)


@pytest.mark.parametrize("hint", [MU * 0.5, MU, MU * 3])
def test_auto_slo_search_finds_the_knee(hint):
    out = search_throughput(mm1_point, hint, slo())
    unloaded_rate = hint * 0.05
    # within the histogram's bucket error (hist.h: 2^-8)
    assert out.slo_ns == pytest.approx(20 * math.log(2) * 1e9 / (MU - unloaded_rate), rel=4e-3)
    expected = analytic_max_rate(out.slo_ns)
    assert expected * 0.98 <= out.max_throughput_rps <= expected
    assert len(out.points) <= 30


def test_fixed_slo_and_unreachable_slo():
    out = search_throughput(mm1_point, MU, slo(kind="fixed", p99_us=100.0))
    assert out.slo_ns == 100_000.0
    expected = analytic_max_rate(out.slo_ns)
    assert expected * 0.98 <= out.max_throughput_rps <= expected
    never = search_throughput(mm1_point, MU, slo(kind="fixed", p99_us=0.001, max_points=8))
    assert never.best is None and never.max_throughput_rps == 0.0


def test_completion_below_threshold_fails_a_point():
    def lossy(rate: float, phase: str) -> PointResult:
        if rate <= MU / 2:
            return mm1_point(rate, phase)
        lat = mm1_latencies(min(rate, MU * 0.999))
        return point(rate, lat[: int(SAMPLES * 0.95)], int(SAMPLES * 0.95))

    out = search_throughput(lossy, MU, slo(kind="fixed", p99_us=1e6))
    assert out.max_throughput_rps <= MU / 2


def test_latency_key_names():
    assert latency_key(99.0) == "p99" and latency_key(99.9) == "p999" and latency_key(50) == "p50"


def test_a_point_that_measured_nothing_never_passes_and_stops_the_search():
    from netkv.slo import MeasurementError, passes

    empty = PointResult(offered_rps=1.0, duration_s=1.0, issued=0, completed=0, dropped=0,
                        timeouts=0, latency_ns={"p50": math.inf, "p99": math.inf},
                        server_requests=np.array([0]))
    assert not passes(empty, math.inf, slo())
    with pytest.raises(MeasurementError, match="completed 0 of 0"):
        search_throughput(lambda rate, phase: empty, MU, slo())


def test_a_passing_unloaded_point_is_a_floor_and_a_candidate():
    """Latency that is worse at low load than at the unloaded point (a VM's
    wakeups): the search must not wander below the unloaded rate, and the
    unloaded point's throughput counts when no search point passes."""
    hint = 50_000.0
    unloaded_rate = hint * 0.05
    probed: list[float] = []

    def wakeup_bound(rate: float, phase: str) -> PointResult:
        if phase != "search":
            return mm1_point(rate, phase)
        probed.append(rate)
        # every search point misses a 20 x p50 SLO: its slowest 2% at 1 ms
        lat = mm1_latencies(rate)
        lat[-SAMPLES // 50:] = 1e6
        return point(rate, lat)

    out = search_throughput(wakeup_bound, hint, slo())
    assert out.unloaded.slo_met
    assert min(probed) > unloaded_rate, probed
    assert out.best is out.unloaded
    assert out.max_throughput_rps == pytest.approx(unloaded_rate)
    # a search point that passes still wins over the unloaded one
    out = search_throughput(mm1_point, hint, slo())
    assert out.best is not out.unloaded and out.max_throughput_rps > unloaded_rate


def test_summary_warns_when_the_unloaded_point_misses_the_slo():
    """Mininet on a small VM: no better tail at low load. The summary says the
    maximum is noise, not load; a normal search prints no warning."""
    from io import StringIO
    from pathlib import Path

    from rich.console import Console

    from netkv.config.compose import load
    from netkv.runner import print_summary

    cfg = load(["protocol=hash", "servers=1"])

    def summary(measure) -> str:
        buf = StringIO()
        out = search_throughput(measure, MU, slo(kind="fixed", p99_us=100.0))
        print_summary(cfg, out, Path("runs/x"), Console(file=buf, width=200))
        return buf.getvalue()

    def noisy(rate: float, phase: str) -> PointResult:
        if phase != "unloaded":
            return mm1_point(rate, phase)
        lat = mm1_latencies(rate)
        lat[-SAMPLES // 50:] = 5e5   # its slowest 2% at 0.5 ms
        return point(rate, lat)

    # 500.7: the midpoint of the bucket holding 500 us
    assert "already misses the SLO (p99 500.7 us > 100.0 us)" in summary(noisy)
    assert "completion" not in summary(noisy)
    assert "warning" not in summary(mm1_point)


def test_summary_prints_the_load_of_the_point_at_max():
    """The per-server shares under the table are the best point's: with an
    unloaded point that missed the SLO (all on server 0) and a best point
    spread evenly, the line said "100.0 0.0 0.0 0.0" (a name reused by the
    warning above it)."""
    from io import StringIO
    from pathlib import Path

    from rich.console import Console

    from netkv.config.compose import load
    from netkv.runner import print_summary

    def measure(rate: float, phase: str) -> PointResult:
        res = mm1_point(rate, phase)
        if phase == "unloaded":
            lat = mm1_latencies(rate)
            lat[-SAMPLES // 50:] = 5e5   # misses the 100 us bound
            res = point(rate, lat)
            res.server_requests = np.array([SAMPLES, 0, 0, 0])
        else:
            res.server_requests = np.full(4, SAMPLES // 4)
        return res

    buf = StringIO()
    out = search_throughput(measure, MU, slo(kind="fixed", p99_us=100.0))
    assert out.best is not out.unloaded
    print_summary(load(["protocol=hash", "servers=4"]), out, Path("runs/x"),
                  Console(file=buf, width=200))
    text = buf.getvalue()
    assert "already misses the SLO" in text
    assert "server 0..3): 25.0 25.0 25.0 25.0" in text, text


def test_summary_warns_when_the_reference_misses_its_own_bound():
    """The SLO reference's unloaded tail above factor x its own median (the
    bound): on such a machine the bound is the noise floor. Said once, with
    how many of the references missed; references within it: no warning."""
    from io import StringIO
    from pathlib import Path

    from rich.console import Console

    from netkv.config.compose import load
    from netkv.runner import print_summary
    from netkv.slo import search_repeated

    cfg = load(["protocol=hash", "servers=1", "repeat=2"])
    quiet = mm1_point(MU * 0.05, "reference")
    bound = 10 * quiet.latency_ns["p50"]  # M/M/1's p99 is 6.6 x its p50: within
    lat = mm1_latencies(MU * 0.05)
    lat[-SAMPLES // 50:] = 3 * bound       # its slowest 2% far above the bound
    noisy = point(MU * 0.05, lat)

    def summary(references: list[PointResult]) -> str:
        buf = StringIO()
        out = search_repeated(lambda i, rate, phase: mm1_point(rate, phase), 2, MU, slo(),
                              lambda i: bound)
        print_summary(cfg, out, Path("runs/x"), Console(file=buf, width=300), references)
        return buf.getvalue()

    assert "misses its own bound in 1 of 2 measurement(s)" in summary([quiet, noisy])
    assert "noise floor" not in summary([quiet, quiet])
    assert "noise floor" not in summary([])


def test_summary_labels_a_baseline_by_its_scheme():
    """A baseline sharing a protocol's code (Harmonia on NetLR's, CliMC on
    NetMC's) is named in the summary's protocol cell, the protocol itself not."""
    from io import StringIO
    from pathlib import Path

    from rich.console import Console

    from netkv.config.compose import load
    from netkv.runner import print_summary

    def cell(overrides: list[str]) -> str:
        buf = StringIO()
        out = search_throughput(mm1_point, MU, slo(kind="fixed", p99_us=100.0))
        print_summary(load(overrides), out, Path("runs/x"), Console(file=buf, width=200))
        return buf.getvalue()

    assert "netlr (harmonia)" in cell(["protocol=netlr", "servers=4", "protocol.replication=harmonia"])
    assert "netmc (climc)" in cell(["protocol=netmc", "protocol.scheme=climc"])
    assert "kvswitch (replicate-to-all)" in cell(["protocol=kvswitch", "protocol.placement=all"])
    plain = cell(["protocol=netlr", "servers=4"])
    assert "netlr" in plain and "(" not in plain.split("netlr", 1)[1].split("\n", 1)[0]


def test_summary_says_a_lossy_reference_lost_requests_not_noise():
    """With injected loss the reference runs without retries (their timeout
    comes from its bound): over 1% lost makes its p99 unbounded. That is the
    loss, not the machine's noise floor; a finite miss is still noise."""
    from io import StringIO
    from pathlib import Path

    from rich.console import Console

    from netkv.config.compose import load
    from netkv.runner import print_summary
    from netkv.slo import search_repeated

    quiet = mm1_point(MU * 0.05, "reference")
    bound = 10 * quiet.latency_ns["p50"]
    lossy = point(MU * 0.05, mm1_latencies(MU * 0.05), completed=SAMPLES * 97 // 100)
    lat = mm1_latencies(MU * 0.05)
    lat[-SAMPLES // 50:] = 3 * bound
    noisy = point(MU * 0.05, lat)

    def summary(overrides: list[str], references: list[PointResult]) -> str:
        buf = StringIO()
        out = search_repeated(lambda i, rate, phase: mm1_point(rate, phase), 2, MU, slo(),
                              lambda i: bound)
        print_summary(load(["protocol=hash", "servers=1", "repeat=2", *overrides]), out,
                      Path("runs/x"), Console(file=buf, width=400), references)
        return buf.getvalue()

    text = summary(["target.faults.loss=0.02"], [quiet, lossy])
    assert "lost over 1% of its requests in 1 of 2 measurement(s)" in text
    assert "drops 2% of packets" in text and "noise floor" not in text
    both = summary(["target.faults.loss=0.02"], [noisy, lossy])
    assert "lost over 1%" in both and "misses its own bound in 1 of 2" in both
    # no injected loss: an unbounded reference is not explained by it
    assert "lost over" not in summary([], [quiet, lossy])
    assert "noise floor" in summary([], [quiet, lossy])
    # its tail said as lost, not as a number (it said "p99 up to inf us")
    assert "(p99 unbounded: over 1% of its requests lost)" in summary([], [quiet, lossy])


def test_summary_says_a_resent_share_above_the_tail_puts_a_timeout_in_it():
    from io import StringIO
    from pathlib import Path

    from rich.console import Console

    from netkv.config.compose import load
    from netkv.runner import print_summary
    from netkv.slo import search_repeated

    def resent(count: int):
        def measure(i: int, rate: float, phase: str) -> PointResult:
            p = mm1_point(rate, phase)
            p.retries = count
            return p
        return measure

    def summary(count: int) -> str:
        buf = StringIO()
        out = search_repeated(resent(count), 1, MU, slo(), lambda i: 1.0)   # nothing meets 1 ns
        print_summary(load(["protocol=hash", "servers=1"]), out, Path("runs/x"),
                      Console(file=buf, width=400))
        return buf.getvalue()

    assert f"{SAMPLES // 10} of {SAMPLES} requests were resent after their timeout, over 1%" \
        in summary(SAMPLES // 10)
    assert "resent" not in summary(SAMPLES // 200)   # 0.5%: below the tail


def test_a_reference_that_lost_over_half_its_requests_says_how_many_completed(tmp_path):
    """The SLO reference's median unbounded because over half of its requests
    were lost (a loaded machine's timeouts): the run stops in one line that
    says how many completed. It said 'completed no request' of one that had
    completed 12% of them."""
    from rich.console import Console

    from netkv.config.compose import load
    from netkv.results.rundir import RunDir
    from netkv.runner import ReferenceRack, reference_bound_ns
    from netkv.slo import MeasurementError

    cfg = load(["protocol=hash", "servers=1"])
    lat = mm1_latencies(MU * 0.05)
    refs = ReferenceRack(cfg)
    for done, said in ((SAMPLES // 8, f"completed only {SAMPLES // 8} of its {SAMPLES} requests: "
                                      "over half lost, its median is unbounded"),
                       (0, "completed no request")):
        refs.points[0] = point(MU * 0.05, lat[:max(done, 1)], completed=done)
        with pytest.raises(MeasurementError) as err:
            reference_bound_ns(cfg, RunDir(tmp_path), [], Console(), 0, refs)
        assert str(err.value) == f"the SLO reference point (hash, unloaded) {said}"
