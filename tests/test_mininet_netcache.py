"""target=mininet with NetCache: netkv-switch running netcache.c, kvservers
running its host logic, the real NetCacheController prewarming the cache
through MininetControlPlane, as ``python -m netkv run target=mininet
protocol=netcache`` builds it (netkv.runner.make_target). Real kvclients
(Linux UDP sockets) must receive switch-served hits: the reply leaves the
switch as if from the server the client addressed."""

from __future__ import annotations

import pytest

try:
    from test_mininet_hash import REASON, _leftovers
except ImportError:
    from tests.test_mininet_hash import REASON, _leftovers

pytestmark = pytest.mark.mininet
skip = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@skip
def test_clients_receive_switch_served_hits_and_nothing_is_left() -> None:
    from netkv.config.compose import load
    from netkv.runner import make_target

    cfg = load(["target=mininet", "protocol=netcache", "servers=4", "clients=1", "keys=20000",
                "alpha=1.2", "write_ratio=0.05", "duration=0.5", "protocol.cache_items=64",
                "topology.timeout_us=0", "topology.drain_ms=1000"])
    with make_target(cfg) as target:
        tag = target.state.tag
        assert target.controller is not None
        res = target.run_point(1000.0, seed=7)
        hits = target.driver.reg_read("stats", 0)          # reads answered by the switch
    assert res.issued > 300
    assert res.completed == res.issued, (res.issued, res.completed, res.timeouts)
    # the 64 hottest of 20 000 keys at alpha 1.2 draw about half the reads
    assert res.switch_replies > 0.2 * res.issued, (res.switch_replies, res.issued)
    assert res.switch_replies == hits                     # every hit reached its client
    assert res.server_requests.sum() + res.switch_replies == res.issued
    links, procs = _leftovers(tag)
    assert links == [] and procs == [], (links, procs)
