"""A read of a never-written key on Mininet returns what the simulator's
returns, for every protocol: the preloaded value (docs/mininet.md). The
simulator's store holds every key at version 1 with its workload size; the
kvservers preload their keys under the key and the hash their protocol's
requests carry (apps/kvserver.c, nk_wire_store_keyhash). NetCache's and
KVSwitch's servers used to answer every such read NOT_FOUND without a value
(their wires carry no keyhash, and the preload held the whole 64 B key), so
their histories and bytes on the wire differed from the simulator's.

One read-only point per protocol, histories recorded, on both targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from netkv.config.compose import load
from netkv.protocols import implemented_on

try:
    from test_hostile_mininet import _rows
    from test_mininet_hash import REASON
except ImportError:
    from tests.test_hostile_mininet import _rows
    from tests.test_mininet_hash import REASON

pytestmark = pytest.mark.mininet
skip = pytest.mark.skipif(REASON is not None, reason=REASON or "")

BASE = ["servers=2", "clients=1", "keys=500", "alpha=0.9", "write_ratio=0", "duration=0.3",
        "record_history=true", "topology.drain_ms=300"]
# NetCache: the 16 hottest keys cached before traffic (the switch answers
# them), the rest read from the servers
EXTRA = {"netcache": ["protocol.cache_items=16"]}


def _sim_found(protocol: str) -> list[int]:
    """`found` of the completed reads of the simulated point."""
    from netkv.runner import make_target

    cfg = load(["target=sim", f"protocol={protocol}", *BASE, *EXTRA.get(protocol, [])])
    with make_target(cfg) as target:
        target.run_point(1000.0, seed=3)
        assert target.last_history is not None
        ops = target.last_history.ops
    done = ops[(ops["outcome"] == 1) & (ops["write"] == 0)]
    assert len(done) > 100
    return sorted({int(o["found"]) for o in done})


@skip
@pytest.mark.parametrize("protocol", implemented_on("mininet"))
def test_a_read_of_a_never_written_key_returns_the_preloaded_value(tmp_path: Path,
                                                                   protocol: str) -> None:
    from netkv.runner import make_target

    assert _sim_found(protocol) == [1]           # every key is preloaded
    cfg = load(["target=mininet", f"protocol={protocol}", *BASE, *EXTRA.get(protocol, [])])
    with make_target(cfg) as target:
        res = target.run_point(1000.0, seed=3, history_dir=str(tmp_path))
    rows = _rows(sorted(tmp_path.glob("history-*.csv")))
    reads = [r for r in rows if r["op"] == "r" and r["status"] != "timeout"]
    assert res.completed > 100 and len(reads) == res.completed, (res.completed, len(reads))
    assert res.server_requests.sum() > 50, res.server_requests   # the servers answered too
    # status ok, value id 0: the preloaded value's bytes (netkv/valpat.h)
    assert sorted({(r["status"], r["value"]) for r in reads}) == [("ok", 0)]
