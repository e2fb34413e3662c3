"""Client hosts with several cores on the simulator (topology.client_cores,
docs/simulator.md): a client's per-packet CPU costs run on whichever of its
cores frees first, a FIFO queue with c servers. More cores lift a
client-bound run, up to c times one core's rate and no further, and leave
a server-bound run as it was."""

from __future__ import annotations

import subprocess
import sys

import pytest

from netkv.config.compose import load
from netkv.runner import make_target

BASE = ["protocol=hash", "servers=4", "clients=2", "keys=10000", "duration=0.05",
        "slo=fixed", "write_ratio=0"]
# 10 us per request sent: one core sends 100 k req/s, the two clients 200 k;
# the servers (1 us each) could take 4 M req/s
CLIENT_BOUND = ["topology.client_tx_ns=10000", "topology.server.service_ns=1000"]
# 10 us per request at each of 4 servers (400 k req/s); 1 us per client request
SERVER_BOUND = ["topology.client_tx_ns=500", "topology.client_rx_ns=500",
                "topology.server.service_ns=10000"]


def point(overrides: list[str], cores: int, rate: float):  # type: ignore[no-untyped-def]
    cfg = load([*BASE, *overrides, f"topology.client_cores={cores}"])
    assert cfg.topology.client_cores == cores
    with make_target(cfg) as target:
        return target.run_point(rate, 3)


def test_cores_lift_a_client_bound_run_by_their_number() -> None:
    # 280 k req/s offered: 1.4 x what one core per client sends
    one = point(CLIENT_BOUND, 1, 280_000)
    two = point(CLIENT_BOUND, 2, 280_000)
    assert one.latency_ns["mean"] > 1e6      # queued at the clients' cores
    assert two.latency_ns["mean"] < 100e3    # 70% busy: no queue to speak of
    # ... but not without bound: 1.4 x two cores' rate queues again
    two_over = point(CLIENT_BOUND, 2, 560_000)
    four = point(CLIENT_BOUND, 4, 560_000)
    assert two_over.latency_ns["mean"] > 1e6
    assert four.latency_ns["mean"] < 100e3


def test_cores_leave_a_server_bound_run() -> None:
    one = point(SERVER_BOUND, 1, 200_000)
    four = point(SERVER_BOUND, 4, 200_000)
    assert four.achieved_rps == one.achieved_rps  # same arrivals, all served
    assert four.latency_ns["mean"] == pytest.approx(one.latency_ns["mean"], rel=0.05)
    assert four.latency_ns["p99"] == pytest.approx(one.latency_ns["p99"], rel=0.10)


@pytest.mark.parametrize("bad", ["0", "1025", "2.5"])
def test_bad_client_cores_are_refused_in_one_line(bad: str) -> None:
    res = subprocess.run([sys.executable, "-m", "netkv", "run", "protocol=hash",
                          f"topology.client_cores={bad}"], capture_output=True, text=True)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "client_cores" in res.stderr
