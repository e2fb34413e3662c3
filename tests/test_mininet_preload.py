"""A read-only point per protocol on the simulator and on Mininet, which
must agree (docs/mininet.md):

- a read of a never-written key returns the preloaded value. The
  simulator's store holds every key at version 1 with its workload size;
  the kvservers preload their keys under the key and the hash their
  protocol's requests carry (apps/kvserver.c, nk_wire_store_keyhash).
  NetCache's and KVSwitch's servers used to answer every such read
  NOT_FOUND without a value (their wires carry no keyhash, and the preload
  held the whole 64 B key);
- ``switch_replies`` (requests the switch answered itself): the simulator
  counts the pipeline's switch replies; kvclient a reply that names no
  server, where the wire names its replier (nk_wire_has), and none where it
  does not. It used to count every reply of KVSwitch, NetLR and NetMC (whose
  wires have no server id) as the switch's. Both count requests, not
  packets: with StarCache's 2-packet items (``starcache-2pkt``) the simulator
  counted each fragment the loop sent, twice kvclient's count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
EXTRA = {"netcache": ["protocol.cache_items=16"],
         # single-key reads (over NetMC's setting): histories are single-key
         "netmc": ["workload.multiget.mean=1"],
         # 1800 B values with 64 B keys: 2 packets per item (docs/starcache.md)
         "starcache-2pkt": ["workload.key_size=64", "workload.value_size=1800"]}
RATE = 1000.0
_POINTS: dict[str, dict[str, Any]] = {}


def _point(protocol: str, folder: Path) -> dict[str, Any]:
    """The point on both targets (once per protocol): each one's result, the
    simulator's `found` of its completed reads, Mininet's history rows."""
    from netkv.runner import make_target

    if protocol in _POINTS:
        return _POINTS[protocol]
    extra = [f"protocol={protocol.split('-')[0]}", *BASE, *EXTRA.get(protocol, [])]
    with make_target(load(["target=sim", *extra])) as target:
        sim = target.run_point(RATE, seed=3)
        assert target.last_history is not None
        ops = target.last_history.ops
    done = ops[(ops["outcome"] == 1) & (ops["write"] == 0)]
    with make_target(load(["target=mininet", *extra])) as target:
        mn = target.run_point(RATE, seed=3, history_dir=str(folder))
    rows = _rows(sorted(folder.glob("history-*.csv")))
    _POINTS[protocol] = {"sim": sim, "found": sorted({int(o["found"]) for o in done}),
                         "mininet": mn, "rows": rows}
    return _POINTS[protocol]


@skip
@pytest.mark.parametrize("protocol", implemented_on("mininet"))
def test_a_read_of_a_never_written_key_returns_the_preloaded_value(
        tmp_path_factory: pytest.TempPathFactory, protocol: str) -> None:
    p = _point(protocol, tmp_path_factory.mktemp(protocol))
    assert p["sim"].completed > 100 and p["found"] == [1]    # every key is preloaded
    res = p["mininet"]
    reads = [r for r in p["rows"] if r["op"] == "r" and r["status"] != "timeout"]
    assert res.completed > 100 and len(reads) == res.completed, (res.completed, len(reads))
    assert res.server_requests.sum() > 50, res.server_requests   # the servers answered too
    # status ok, value id 0: the preloaded value's bytes (netkv/valpat.h)
    assert sorted({(r["status"], r["value"]) for r in reads}) == [("ok", 0)]


@skip
@pytest.mark.parametrize("protocol", [*implemented_on("mininet"), "starcache-2pkt"])
def test_switch_replies_are_counted_as_the_simulator_counts_them(
        tmp_path_factory: pytest.TempPathFactory, protocol: str) -> None:
    p = _point(protocol, tmp_path_factory.mktemp(protocol))
    sim, mn = p["sim"], p["mininet"]
    assert mn.completed > 100
    if sim.switch_replies == 0:      # hash, Pegasus, KVSwitch, NetLR, NetMC
        assert mn.switch_replies == 0, (mn.switch_replies, mn.completed)
    else:                            # NetCache's hits, StarCache's cache packets
        share = sim.switch_replies / sim.completed
        assert abs(mn.switch_replies / mn.completed - share) < 0.15, (
            mn.switch_replies, mn.completed, sim.switch_replies, sim.completed)
