"""The simulator against queueing theory: one server, Poisson arrivals, no
network delay, so a request's latency is its sojourn time.

M/M/1: W = 1/(mu - lambda), sojourn ~ Exp(mu - lambda) so p99 = ln(100) W.
M/D/1: W = 1/mu + rho / (2 mu (1 - rho)) (Pollaczek-Khinchine).
"""

from __future__ import annotations

import math

import pytest

from netkv.config.compose import load
from netkv.native import NativeBuildMissing, library_path

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover - depends on the build
    pytest.skip(f"libnetkv not built: {exc}", allow_module_level=True)

from netkv.targets.sim import SimTarget

SERVICE_NS = 5000.0
MU = 1e9 / SERVICE_NS


def single_server(service: str, duration: float):
    return load([
        "servers=1", "clients=1", "keys=1000", "workload=uniform", f"duration={duration}",
        "topology.link_latency_ns=0", "topology.link_gbps=0", "topology.switch_latency_ns=0",
        f"topology.server.service={service}", f"topology.server.service_ns={SERVICE_NS}",
    ])


# enough customers for a 3% tolerance with margin: the sample mean's
# relative standard error is ~0.4% at rho=0.5 (1.6M customers) and ~0.8%
# at rho=0.8 (8M customers, strongly autocorrelated sojourn times)
@pytest.mark.parametrize("rho,duration", [(0.5, 8.0), (0.8, 40.0)])
def test_mm1_mean_and_p99(rho: float, duration: float) -> None:
    lam = rho * MU
    with SimTarget(single_server("exponential", duration)) as target:
        r = target.run_point(lam, seed=7)
    w = 1e9 / (MU - lam)
    assert r.completed == r.issued
    assert r.latency_ns["mean"] == pytest.approx(w, rel=0.03)
    assert r.latency_ns["p99"] == pytest.approx(math.log(100) * w, rel=0.03)
    assert r.server_requests.tolist() == [r.completed]


def test_md1_mean() -> None:
    rho = 0.8
    lam = rho * MU
    with SimTarget(single_server("deterministic", 8.0)) as target:
        r = target.run_point(lam, seed=3)
    w = SERVICE_NS + rho * SERVICE_NS / (2 * (1 - rho))
    assert r.latency_ns["mean"] == pytest.approx(w, rel=0.03)
    # deterministic service: nobody is faster than the service time
    assert r.hist_lower_ns[r.hist_counts > 0][0] <= SERVICE_NS
    assert r.latency_ns["p50"] > SERVICE_NS


def test_workers_share_one_queue() -> None:
    """M/M/2 at rho=0.5: W = 1/mu + C/(2mu - lambda), C = rho^2 2/(1+rho)... (Erlang C)."""
    cfg = load([
        "servers=1", "clients=1", "keys=1000", "workload=uniform", "duration=4",
        "topology.link_latency_ns=0", "topology.link_gbps=0", "topology.switch_latency_ns=0",
        "topology.server.workers=2", f"topology.server.service_ns={SERVICE_NS}",
    ])
    c, rho = 2, 0.5
    lam = rho * c * MU
    a = lam / MU
    erlang_c = (a**c / math.factorial(c) / (1 - rho)) / (
        sum(a**k / math.factorial(k) for k in range(c)) + a**c / math.factorial(c) / (1 - rho))
    w = 1e9 / MU + erlang_c * 1e9 / (c * MU - lam)
    with SimTarget(cfg) as target:
        r = target.run_point(lam, seed=5)
    assert r.latency_ns["mean"] == pytest.approx(w, rel=0.03)


def test_by_key_dispatch_partitions_workers() -> None:
    """by_key: worker = mix64(keyhash) mod W, one FIFO each -> W independent M/M/1
    queues at lambda/W (uniform keys), not one M/M/W queue."""
    cfg = load([
        "servers=1", "clients=1", "keys=100000", "workload=uniform", "duration=4",
        "topology.link_latency_ns=0", "topology.link_gbps=0", "topology.switch_latency_ns=0",
        "topology.server.workers=4", "topology.server.dispatch=by_key",
        f"topology.server.service_ns={SERVICE_NS}",
    ])
    lam = 0.5 * 4 * MU
    with SimTarget(cfg) as target:
        r = target.run_point(lam, seed=5)
    assert r.latency_ns["mean"] == pytest.approx(1e9 / (MU - lam / 4), rel=0.03)
