"""StarCache's coherence on the simulator, checked on client histories.

StarCache is not claimed linearizable (a read parked before a write may be
answered by the old cache packet). The property checked
(netkv.lincheck.session): no client reads a value older than its own last
write it saw acknowledged. It holds in strict mode (the per-key
pending-write counter, digest 8.3) also under 1% loss and reordering, and
fails in the faithful 1-bit mode: the first of two concurrent writes'
replies revalidates the key while the second is in flight, and its cache
packet keeps serving the older value after the second's acknowledgement.
"""

from __future__ import annotations

import numpy as np
import pytest

from netkv.config.compose import load
from netkv.lincheck.session import check_read_your_writes, check_read_your_writes_by_value
from netkv.native import NativeBuildMissing, library_path

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover - depends on the build
    pytest.skip(f"libnetkv not built: {exc}", allow_module_level=True)

from netkv.protocols import starcache as sc
from netkv.sim.engine import SimEngine
from netkv.sim.native import OP_OK
from netkv.targets.sim import SimTarget

# 8 clients writing the 16 cached hot keys of 1000 concurrently
BASE = ["protocol=starcache", "servers=4", "clients=8", "keys=1000", "alpha=1.2",
        "write_ratio=0.2", "record_history=true", "duration=0.05", "protocol.cache_size=16"]
FAULTS = ["target.faults.loss=0.01", "target.faults.reorder=0.01",
          "target.faults.reorder_us=50"]


def history(overrides: list[str]):  # type: ignore[no-untyped-def]
    cfg = load([*BASE, *overrides])
    factory = sc.sim_controller_factory(cfg)
    with SimTarget(cfg) as t, SimEngine(cfg, t.workload, 400_000, 11,
                                        sc.pipeline_params(cfg)) as eng:
        st = eng.run(factory(eng), epoch_s=0.01)
        ops = eng.history()
        stats = factory.last.switch_stats()  # type: ignore[attr-defined]
    res = check_read_your_writes(ops["client"], ops["write"], ops["key"], ops["invoke_ns"],
                                 ops["done_ns"], ops["outcome"] == OP_OK, ops["ver"])
    return st, stats, res


@pytest.mark.parametrize("faults", [[], FAULTS], ids=["clean", "loss-reorder"])
def test_strict_mode_never_serves_a_client_an_older_value_than_its_own_write(faults) -> None:
    st, stats, res = history(faults)
    assert res.ok, [str(v) for v in res.violations[:5]]
    assert res.reads_checked > 5000            # reads after the client's own write
    assert stats["invalidations"] > 2000 and stats["revalidations"] > 100
    assert st.switch_replies > 1000            # the cache served while writes ran
    if faults:
        assert st.completed < st.issued        # the faults did bite


def test_faithful_mode_shows_the_stale_read_of_the_1_bit_flag() -> None:
    st, stats, res = history(["protocol.faithful=true", *FAULTS])
    assert not res.ok
    assert len(res.violations) >= 5, res.violations
    v = res.violations[0]
    assert v.read_ver < v.acked_ver and v.read_invoke_ns > v.acked_ns


def test_the_check_on_hand_made_histories() -> None:
    # client 0 writes key 1 (acked v2 at t=10), then reads v1 at 20: stale;
    # its read at 5 (before the ack) and client 1's read of v1 are not
    client = np.array([0, 0, 0, 1, 0])
    write = np.array([True, False, False, False, False])
    key = np.array([1, 1, 1, 1, 2])
    invoke = np.array([0, 5, 20, 30, 40])
    done = np.array([10, 8, 25, 35, 45])
    ok = np.ones(5, dtype=bool)
    ver = np.array([2, 1, 1, 1, 1])
    res = check_read_your_writes(client, write, key, invoke, done, ok, ver)
    assert [(v.client, v.key, v.read_ver, v.acked_ver) for v in res.violations] == [(0, 1, 1, 2)]
    assert res.reads_checked == 1
    ver[2] = 2                                  # the read sees its write: fine
    assert check_read_your_writes(client, write, key, invoke, done, ok, ver).ok
    ok[0] = False                               # an unacknowledged write binds nothing
    ver[2] = 1
    assert check_read_your_writes(client, write, key, invoke, done, ok, ver).reads_checked == 0
    invoke[2] = 10                              # a read at the ack's instant: not bound
    ok[0] = True
    assert check_read_your_writes(client, write, key, invoke, done, ok, ver).ok


def test_the_value_check_on_hand_made_histories() -> None:
    """By value ids (Mininet: the wire carries no versions): client 0 wrote
    0xB (acked at 40, invoked at 30) after client 1's 0xA (acked at 20)."""
    client = np.array([1, 0, 0, 2, 0])
    write = np.array([True, True, False, True, False])
    key = np.array([1, 1, 1, 1, 2])
    invoke = np.array([10, 30, 50, 15, 60])
    done = np.array([20, 40, 55, -1, 65])
    ok = np.array([True, True, True, False, True])
    value = np.array([0xA, 0xB, 0xB, 0xC, 0], np.uint64)
    res = check_read_your_writes_by_value(client, write, key, invoke, done, ok, value)
    assert res.ok and res.reads_checked == 1     # key 2: client 0 never wrote it
    value[2] = 0xC                                # a write of unknown outcome: may land
    assert check_read_your_writes_by_value(client, write, key, invoke, done, ok, value).ok
    for v, why in ((0xA, "before it began"), (0, "preloaded"), (0xD, "nobody wrote")):
        value[2] = v
        res = check_read_your_writes_by_value(client, write, key, invoke, done, ok, value)
        assert len(res.violations) == 1 and why in str(res.violations[0]), (v, res.violations)
    value[2] = 0xA
    done[0] = 35                                  # 0xA was concurrent with 0xB: may follow it
    assert check_read_your_writes_by_value(client, write, key, invoke, done, ok, value).ok


def test_lost_writes_do_not_keep_the_cache_from_serving() -> None:
    """A W_REQ lost after the switch counted it (or its W_REP) left the
    key's pending_writes above 0 for good: the key stayed INVALID and its
    reads went to the server. The switch now restarts the count once no
    write has reached the key for ``stuck_ms`` (longer than any write's
    round trip) and the watchdog refetches. Under 1% loss and reordering:
    with a ``stuck_ms`` the run never reaches, a lost write keeps its key
    INVALID until 32 later write numbers of the key (late replies
    included) push it out of ``wmask``'s window (before the window: for
    good, under a third of what the loop serves without faults); with 1 ms
    the loop serves more, and the session property still holds."""
    clean, _, _ = history([])
    before, stats_before, _ = history([*FAULTS, "protocol.stuck_ms=1000"])
    after, stats, res = history([*FAULTS, "protocol.stuck_ms=1"])
    print(f"switch-served: {clean.switch_replies} clean, {before.switch_replies} under faults "
          f"without the reset, {after.switch_replies} with it ({stats['stuck_writes']} resets)")
    assert stats_before["stuck_writes"] == 0
    assert before.switch_replies < 0.5 * clean.switch_replies
    assert stats["stuck_writes"] > 0
    assert after.switch_replies > 1.3 * before.switch_replies
    # and absolutely (8072 clean, 5374 with the restart): a regression
    # lowering both runs would keep the ratio above
    assert after.switch_replies > 0.5 * clean.switch_replies
    assert res.ok, [str(v) for v in res.violations[:5]]


BIG = ["workload.key_size=16", "workload.value_size=5664"]


@pytest.mark.parametrize("faults", [[], FAULTS], ids=["clean", "loss-reorder"])
def test_multi_packet_writes_keep_the_session_property(faults) -> None:
    """Items of 4 packets (5664 B values, 16 B keys: Fig. 17's), 20% writes:
    a client sends each write as its 4 W_REQ fragments (docs/starcache.md,
    "Multi-packet items"), the switch counts it once (its FRAG 0: one
    invalidation per write of a cached key), the home server applies it once
    it has all 4 and its 4 W_REP fragments replace the key's in the loop.
    Strict mode: no client reads an older value than its own acknowledged
    write, with and without loss and reordering."""
    st, stats, res = history([*BIG, *faults])
    print(f"issued {st.issued}, client packets {st.client_packets}, served "
          f"{st.switch_replies}, invalidations {stats['invalidations']}, revalidations "
          f"{stats['revalidations']}, reads checked {res.reads_checked}")
    assert res.ok, [str(v) for v in res.violations[:5]]
    assert res.reads_checked > 2000
    assert stats["revalidations"] > 100
    # a write is 4 packets, a read 1 (retries add a few: under loss and
    # reordering a write whose FRAG 0 reaches the server before the rest is
    # refused and sent again at once, 4 more packets: 1.70 per request, 545
    # retries, against 1.61 and 64 when it waited for its timeout)
    assert 1.5 * st.issued < st.client_packets < 1.75 * st.issued, (st.client_packets, st.issued)
    # the 16 hot keys draw ~half the requests, a fifth of them writes, each
    # counted once (not once per fragment)
    assert 0.05 * st.issued < stats["invalidations"] < 0.2 * st.issued, (stats, st.issued)
    # reads the loop answered (a request, not its 4 fragments: 1000 packets
    # when switch_replies counted packets)
    assert st.switch_replies > 250
    if not faults:
        assert st.completed == st.issued
