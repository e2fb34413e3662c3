"""Finite client and switch rates on the simulator (topology.client_max_rps,
topology.switch_mpps; docs/simulator.md): a switch that serves requests
itself (NetCache hits) is bounded as on a testbed, for every protocol, and
the fluid saturated throughput names the resource that saturates first
(`sat_bottleneck`)."""

from __future__ import annotations

import pytest

from netkv.config.compose import load
from netkv.results.rundir import saturated
from netkv.runner import make_target

BASE = ["servers=4", "clients=4", "keys=10000", "duration=0.05", "slo=fixed"]


def point(overrides: list[str], rate: float):  # type: ignore[no-untyped-def]
    cfg = load([*BASE, *overrides])
    with make_target(cfg) as target:
        res = target.run_point(rate, 3)
        st = target.last_engine_stats
    return res, st, saturated(res, res.server_requests)


def test_netcache_hits_are_bounded_by_the_clients() -> None:
    """Read-only Zipf 1.2: ~90% of reads are switch hits. Without a client
    rate only the clients' 25 Gb/s links bound them (tens of M req/s); with
    100 k pkt/s per client the bound is 4 x 100 k, and at twice that
    offered the requests queue at the clients."""
    args = ["protocol=netcache", "alpha=1.2", "write_ratio=0"]
    free, _, (free_sat, free_why) = point(args, 800_000)
    assert free_why == "links" and free_sat > 10e6, (free_sat, free_why)
    capped, st, (sat, why) = point([*args, "topology.client_max_rps=100000"], 800_000)
    assert why == "clients"
    assert sat == pytest.approx(4 * 100_000 * st.issued / st.client_packets)
    assert 380_000 < sat <= 400_000
    assert capped.latency_ns["p50"] > 20 * free.latency_ns["p50"]   # queued at the clients
    assert capped.switch_replies > 0.8 * capped.issued


def test_switch_rate_bounds_every_protocol() -> None:
    """hash: each request is two switch packets (request, reply): at
    0.4 Mpps the switch saturates at ~200 k req/s, below the servers."""
    _, st, (sat, why) = point(["protocol=hash", "topology.switch_mpps=0.4"], 100_000)
    assert why == "switch"
    assert st.switch_packets == pytest.approx(2 * st.issued, rel=0.01)
    assert sat == pytest.approx(0.4e6 / 2, rel=0.01)
    slow, _, _ = point(["protocol=hash", "topology.switch_mpps=0.4"], 300_000)
    fast, _, _ = point(["protocol=hash"], 300_000)
    assert slow.latency_ns["p99"] > 5 * fast.latency_ns["p99"]


def test_links_bound_and_defaults_leave_the_servers() -> None:
    _, st, (sat, why) = point(["protocol=hash", "topology.link_gbps=0.05"], 20_000)
    assert why == "links" and sat < 60_000
    res, _, (sat, why) = point(["protocol=pegasus"], 100_000)
    assert why == "servers" and set(res.resource_bounds_rps) == {"links"}


def test_bad_rates_are_refused_in_one_line() -> None:
    import subprocess
    import sys

    for arg in ("topology.client_max_rps=-1", "topology.switch_mpps=-2"):
        res = subprocess.run([sys.executable, "-m", "netkv", "run", "protocol=hash", arg],
                             capture_output=True, text=True)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
