"""KVSwitch on the simulator (netkv/protocols/kvswitch.py, docs/kvswitch.md):
the controller's placement and replica counts are the paper's, and the
prewarmed rack balances a skewed read load better than static hashing."""

from __future__ import annotations

import numpy as np
import pytest

from netkv.config.compose import load
from netkv.native import NativeBuildMissing, library_path
from netkv.protocols import lookup
from netkv.protocols import kvswitch as ks
from netkv.targets.sim import SimTarget

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover
    pytest.skip(str(exc), allow_module_level=True)


def test_ring_placement_is_the_papers_examples() -> None:
    # M = 8, servers numbered 0..7 here (the paper's 1..8): owner 1, r = 4 -> 3, 5, 7
    assert ks.placement(0, 4, 8) == [0, 2, 4, 6]
    # owner 4, r = 5 -> step 1 -> servers 5, 6, 7, 8
    assert ks.placement(3, 5, 8) == [3, 4, 5, 6, 7]
    assert ks.copies(10.0, 3.0, 8) == 4
    assert ks.copies(100.0, 3.0, 8) == 8      # capped at M
    assert ks.copies(3.0, 3.0, 8) == 1        # L <= T: not installed


def lam(loads: np.ndarray) -> float:
    return float(np.abs(loads - loads.mean()).sum() / (len(loads) * loads.mean()))


def run(protocol: str) -> tuple[np.ndarray, SimTarget]:
    cfg = load([f"protocol={protocol}", "alpha=0.99", "servers=16", "keys=100000",
                "duration=0.05"] + (["protocol.hot_keys=1000"] if protocol == "kvswitch" else []))
    plugin = lookup(protocol)
    tg = SimTarget(cfg, controller_factory=plugin.sim_controller(cfg),
                   params=plugin.pipeline_params(cfg))
    r = tg.run_point(1e6, 1)
    assert r.completed == r.issued
    return r.server_requests.astype(np.float64), tg


def test_kvswitch_balances_a_skewed_load_better_than_hash() -> None:
    kv, tg = run("kvswitch")
    hs, _ = run("hash")
    ctl = tg.controller_factory.last  # type: ignore[union-attr]
    assert 0 < len(ctl.hot) <= 1000
    # replicas per server well below replicate-to-all (K per server)
    assert ctl.replicas_per_server() < 1000
    assert lam(kv) < 0.5 * lam(hs), (lam(kv), lam(hs))
