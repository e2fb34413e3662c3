"""``install_below_t`` (docs/kvswitch.md "Keys below T"): a predicted-hot key
whose L̂ is at most T enters HotkeyTable with r = 1. The C pipeline (run
in-process) then counts its queries exactly in HotkeyCount, never in
HashPipe, sends its reads to the owner only and its writes to the owner
unicast, stamped. With ``install_below_t: false`` (the default) the same key
stays cold and the check fails."""

from __future__ import annotations

import pytest

from netkv.pipeline import FWD_MCAST, FWD_PORT, Pipeline
from netkv.protocols import kvswitch as ks
from netkv.protocols.base import ControlPlane
from netkv.wire import codec
from netkv.wire.codec import KvswitchOp, Msg, Proto

N, CLIENT = 4, 4
HOT, WARM = b"h" * 16, b"w" * 16          # owners 1 and 2
COLD = [bytes([0x63, i]) * 8 for i in range(40)]   # owner 3 (filler)
OWNER = {HOT: 1, WARM: 2, **{k: 3 for k in COLD}}


class Plane(ControlPlane):
    def __init__(self, sw: Pipeline) -> None:
        self.n_servers = N
        self._sw = sw
        self.sent: list[tuple[int, Msg]] = []

    @property
    def switch(self) -> Pipeline:
        return self._sw

    def cpu_messages(self, max_packets: int = 4096) -> list[tuple[int, Msg]]:
        return []

    def packet_out(self, msg: Msg, dst: int) -> None:
        self.sent.append((dst, msg))

    def server_ctl(self, server: int, line: str) -> str:
        raise AssertionError("not prewarmed")

    @property
    def now_s(self) -> float:
        return 0.0


def send(sw: Pipeline, key: bytes, op: KvswitchOp = KvswitchOp.GET, seq: int = 0):  # type: ignore[no-untyped-def]
    m = Msg(proto=Proto.KVSWITCH, op=op, req_id=seq, key=key,
            value=b"v" if op == KvswitchOp.SET else b"")
    d = sw.process(codec.encode(m), src=CLIENT, dst=OWNER[key], port=CLIENT)
    assert d is not None
    return d


def planned(install_below_t: bool, atomic: bool = True) -> tuple[Pipeline, ks.KVSwitchController]:
    """One period (350 reads spread over COLD, 600 of HOT, 50 of WARM: the
    servers' max/mean − 1 is far above ε, so T falls to 0.8 / M of the
    load = 200), then the controller plans: L̂ = (1 − α)·count with no
    history, HOT's 300 gets r = ⌈300 / 200⌉ = 2, WARM's 25 is below T."""
    sw = Pipeline("kvswitch", n_servers=N, n_clients=1,
                  params="hot_keys=8;hashpipe_stages=2;strict=1;amo=0;amo_window=16")
    # False: as a P4 switch's driver says (its packets are mid-pipeline
    # while a control request lands)
    sw.atomic_control = atomic
    proto = ks.KVSwitchProtocol(name="kvswitch", hot_keys=8, hashpipe_stages=2,
                                min_period_queries=1, install_below_t=install_below_t)
    keymap = {k: ks.KeyInfo(keyhash=i, owner=o) for i, (k, o) in enumerate(OWNER.items())}
    ctl = ks.KVSwitchController(Plane(sw), proto, keymap.get)
    # the filler first: HashPipe (8 cells) would evict WARM's count
    for i in range(350):
        send(sw, COLD[i % len(COLD)], seq=i)
    for i in range(600):
        send(sw, HOT, seq=i)
    for i in range(50):
        send(sw, WARM, seq=i)
    ctl.epoch(0.0)
    assert len(ctl.hot[HOT].servers) == 2
    return sw, ctl


def check_counted_at_owner(sw: Pipeline, ctl: ks.KVSwitchController, key: bytes) -> None:
    """``key`` is in HotkeyTable with r = 1: n reads count n in its
    HotkeyCount cell and nothing in HashPipe, each goes to the owner
    unredirected; a write goes to the owner alone, stamped with the slot's Ver."""
    assert key in ctl.hot, "not installed: HashPipe counts it (approximately)"
    h = ctl.hot[key]
    assert h.servers == [OWNER[key]]
    sw.reg_write("period_reset", 0, 1)
    for i in range(37):
        d = send(sw, key, seq=i)
        assert (d.fwd, d.dst) == (FWD_PORT, OWNER[key])
    assert sw.reg_read("HotkeyCount", h.slot) == 37
    assert sum(sw.reg_read_range("HashPipeCount", 0, ctl.hp_cells)) == 0
    assert sw.reg_read_range("Loadcount", 0, N) == [37 * (s == OWNER[key]) for s in range(N)]
    ver = sw.reg_read("Ver", h.slot)
    d = send(sw, key, KvswitchOp.SET, seq=99)
    assert (d.fwd, d.dst) == (FWD_PORT, OWNER[key])   # unicast, not a group
    out = codec.decode(Proto.KVSWITCH, d.payload)
    assert out.ver == ver + 1 and out.result == OWNER[key] + 1
    assert sw.reg_read("stats", 1) == 0               # nothing redirected


def test_below_t_key_is_counted_exactly_and_served_by_its_owner() -> None:
    sw, ctl = planned(install_below_t=True)
    check_counted_at_owner(sw, ctl, WARM)
    # no REPL_CMD: with no replica to order writes against the owner need
    # not know (a stamped write tells it)
    assert not [m for _, m in ctl.plane.sent if m.key == WARM]
    # above T: replicated as before, writes multicast
    assert send(sw, HOT, KvswitchOp.SET).fwd == FWD_MCAST
    m = ctl.point_metrics()
    assert (m["installed_keys"], m["replicated_keys"]) == (len(ctl.hot), 1)


def test_the_check_fails_on_the_default_where_below_t_keys_stay_cold() -> None:
    sw, ctl = planned(install_below_t=False)
    assert WARM not in ctl.hot
    with pytest.raises(AssertionError, match="not installed"):
        check_counted_at_owner(sw, ctl, WARM)
    m = ctl.point_metrics()
    assert m["installed_keys"] == m["replicated_keys"] == 1


def test_a_below_t_key_rising_above_t_keeps_its_slot_and_gets_replicas() -> None:
    sw, ctl = planned(install_below_t=True)
    slot = ctl.hot[WARM].slot
    for i in range(900):
        send(sw, WARM, seq=i)
    for i in range(100):
        send(sw, COLD[i % len(COLD)], seq=i)
    ctl.epoch(0.1)
    assert ctl.hot[WARM].slot == slot and len(ctl.hot[WARM].servers) > 1
    assert send(sw, WARM, KvswitchOp.SET).fwd == FWD_MCAST


def _leave(sw: Pipeline, ctl: ks.KVSwitchController) -> None:
    """A period in which only HOT and the filler are seen, WARM's history
    forgotten: its prediction is 0 and it leaves HotkeyTable."""
    sw.reg_write("period_reset", 0, 1)
    ctl.prev = {k: v for k, v in ctl.prev.items() if k != WARM}
    for i in range(600):
        send(sw, HOT, seq=i)
    for i in range(400):
        send(sw, COLD[i % len(COLD)], seq=i)
    ctl.epoch(0.1)


@pytest.mark.parametrize("atomic", [True, False])
@pytest.mark.parametrize("written", [False, True])
def test_an_r1_key_leaving_costs_the_owner_an_eviction_only_if_a_write_was_stamped(
        written: bool, atomic: bool) -> None:
    """An r = 1 key's owner is not told at install; at removal the
    controller reads Ver: unchanged, nothing is sent (the owner holds the
    key as cold); a stamped write made the owner take it hot, and it gets
    REPL_EVICT at once (then repeated), or would answer ERROR to every
    unstamped write. Before, every r = 1 install cost a REPL_CMD and every
    removal three REPL_EVICTs, thousands a period when few queries a period
    make the top K churn (test_kvswitch_sim's below-T completion test). On
    a P4 switch the slot is held a period."""
    sw, ctl = planned(install_below_t=True, atomic=atomic)
    slot = ctl.hot[WARM].slot
    if written:
        send(sw, WARM, KvswitchOp.SET, seq=7)
    ctl.plane.sent.clear()
    _leave(sw, ctl)
    assert WARM not in ctl.hot
    # the C pipeline: free at once (maybe taken by a new key already)
    assert (slot in ctl.free or any(h.slot == slot for h in ctl.hot.values())) == atomic
    evicts = [(dst, m.ver) for dst, m in ctl.plane.sent
              if m.op == KvswitchOp.REPL_EVICT and m.key == WARM]
    assert evicts == ([(OWNER[WARM], ctl._ver())] if written else [])
    ctl.plane.sent.clear()
    ctl.epoch(0.2)
    assert slot in ctl.free or any(h.slot == slot for h in ctl.hot.values())
    again = [m for _, m in ctl.plane.sent if m.op == KvswitchOp.REPL_EVICT and m.key == WARM]
    assert len(again) == (1 if written else 0)   # the repeat only


def test_a_write_stamped_after_the_delete_still_costs_the_owner_an_eviction() -> None:
    """A P4 switch applies HotkeyTable and writes Ver in separate steps: a
    write that matched just before the controller's table_delete stamps Ver
    just after it, and reaches the owner, which takes the key hot. Read only
    at the delete (the code before 2026-11-29), Ver had not moved: no
    eviction was ever sent and the owner answered ERROR to every unstamped
    write of the key for good. Read again a period later, the stamp is
    seen; with ``atomic_control`` (the C pipeline) no stamp can come late
    and the slot is not held."""
    sw, ctl = planned(install_below_t=True, atomic=False)
    h = ctl.hot[WARM]
    ctl.plane.sent.clear()
    _leave(sw, ctl)
    assert WARM not in ctl.hot
    assert not [m for _, m in ctl.plane.sent if m.key == WARM]
    sw.reg_write("Ver", h.slot, h.ver0 + 1)   # the late stamp
    ver = ctl._ver()
    ctl.epoch(0.2)
    evicts = [(dst, m.ver) for dst, m in ctl.plane.sent
              if m.op == KvswitchOp.REPL_EVICT and m.key == WARM]
    assert evicts == [(OWNER[WARM], ver)]


@pytest.mark.parametrize("atomic", [True, False])
def test_a_removed_replicated_keys_slot_is_not_reused_in_the_same_period_on_p4(
        atomic: bool) -> None:
    """On a P4 switch a told key's slot reused at once: the new key's
    install writes this period's eviction version into Ver, and a write of
    the removed key that matched just before the delete would be stamped one
    above it, above every REPL_EVICT its owner gets. The slot waits a
    period there; on the C pipeline it is free at once."""
    sw, ctl = planned(install_below_t=True, atomic=atomic)
    slot = ctl.hot[HOT].slot
    ctl.prev = {}
    ctl._apply({WARM: 1})   # HOT leaves
    assert HOT not in ctl.hot and (slot in ctl.free) == atomic   # no install here
    ctl.epoch(0.2)
    assert slot in ctl.free or any(h.slot == slot for h in ctl.hot.values())
