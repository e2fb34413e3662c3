"""StarCache on the simulator: the controller (netkv/protocols/starcache.py)
over the C pipeline and host logic, with the cache packets looping through
the simulator's recirculation port (docs/starcache.md).

Covered: hot reads are served by cache packets (parked, answered on a pass,
nothing counted as dropped), the recirculation port's rate bounds what the
loop serves (a slower port overflows to the servers), writes invalidate and
the last write's reply puts the new value back into the loop, the config's
request-table limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from netkv.config.compose import load
from netkv.native import NativeBuildMissing, library_path

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover - depends on the build
    pytest.skip(f"libnetkv not built: {exc}", allow_module_level=True)

from netkv.cli import main
from netkv.constants import SC_WRITE_MAX, ScStat
from netkv.protocols import lookup
from netkv.protocols import starcache as sc
from netkv.sim.engine import SimEngine
from netkv.targets.sim import SimTarget

SMALL = ["servers=16", "keys=100000", "duration=0.05", "seed=3"]


def run(overrides: list[str], rate: float, cache: int = 32) -> tuple[object, dict[str, int], object]:
    cfg = load(["protocol=starcache", *SMALL, f"protocol.cache_size={cache}", *overrides])
    factory = sc.sim_controller_factory(cfg)
    with SimTarget(cfg) as t, SimEngine(cfg, t.workload, rate, 1, sc.pipeline_params(cfg)) as eng:
        epochs = factory(eng)
        st = eng.run(epochs, epoch_s=0.01)
        ctl = factory.last  # type: ignore[attr-defined]
        stats = ctl.switch_stats()
        share = (float(t.workload.probabilities()[:cache].sum())
                 if t.workload.kind == "zipf" else 0.0)
    return st, stats, (ctl, share)


def test_hot_reads_are_served_from_the_loop() -> None:
    st, stats, (ctl, share) = run([], 4e5)
    assert ctl.stats.fetch_ok == 32 and len(ctl.items) == 32
    assert st.completed == st.issued and st.dropped == 0   # parked reads are not drops
    assert st.switch_replies == stats["served"] > 0
    # every served read was parked first, and cache packets went round idle too
    assert stats["parked"] == stats["served"] and stats["loops"] > 0
    # the 32 hottest keys' reads, less those issued before the fetches returned
    # and those that overflowed a full queue
    hot = share * st.issued
    assert stats["hits"] <= hot * 1.05
    assert st.switch_replies > 0.9 * (stats["hits"] - stats["overflow"] - stats["invalid_reads"])
    assert st.switch_replies > 0.8 * hot


def test_the_recirculation_port_rate_bounds_the_loop() -> None:
    """The loop period is the sum of the cache packets' serialization at
    recirc_gbps: at 0.5 Gb/s, 32 cache packets of 292 B on the wire (64 B
    key, 128 B value) take ~150 us per round, so a key serves ~6.7 k reads/s
    and the hottest keys (~33 k reads/s for the first) overflow; at 100 Gb/s
    nothing does."""
    fast, fstats, _ = run(["topology.recirc_gbps=100"], 4e5)
    slow, sstats, _ = run(["topology.recirc_gbps=0.5"], 4e5)
    assert fstats["overflow"] < 0.01 * fstats["hits"]
    assert sstats["overflow"] > 0.2 * sstats["hits"]
    assert slow.switch_replies < 0.8 * fast.switch_replies
    assert fstats["loops"] > 100 * sstats["loops"]   # idle rounds, far fewer when slow
    assert slow.completed == slow.issued        # overflowed reads go to the servers


def test_writes_invalidate_and_the_reply_refills_the_loop(tmp_path: Path) -> None:
    lines = [f"R {i % 10}" for i in range(3000)]
    lines += [f"W {i % 10}" for i in range(300)]
    lines += [f"R {i % 10}" for i in range(3000)]
    trace = tmp_path / "trace.txt"
    trace.write_text("\n".join(lines) + "\n")
    st, stats, (ctl, _) = run(["workload.kind=trace", f"workload.trace={trace}",
                               "duration=0.07"], 1e5, cache=10)
    assert st.completed == st.issued
    assert stats["invalidations"] == 300
    assert stats["revalidations"] == 300       # reads are serial here: one write in flight
    assert stats["stale_updates"] == 0
    assert ctl.stats.refetches == 0
    # reads after the burst are served by the loop again
    assert st.switch_replies > 5000
    assert st.switch_replies == stats["served"]


def test_request_table_limit_is_validated(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "protocol=starcache", "protocol.keys=4096", "protocol.slots=32"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().count("\n") == 0
    assert "131072" in err and "65536" in err


def test_mininet_refuses_a_write_above_what_a_client_splits(
        capsys: pytest.CaptureFixture[str]) -> None:
    """On Mininet kvclient sends a packet of at most 1472 B of UDP payload;
    a write of a multi-packet item goes as its fragments (docs/starcache.md,
    "Multi-packet items"), each within it, up to SC_WRITE_MAX value bytes
    (the largest a server reassembles): a larger value is refused in one
    line naming the sizes allowed; multi-packet writes below it are
    accepted. A protocol whose writes are one packet keeps its limit."""
    for ratio in ("0.1", "0"):
        code = main(["run", "target=mininet", "protocol=starcache", f"write_ratio={ratio}",
                     f"workload.value_size={SC_WRITE_MAX + 1}"])
        err = capsys.readouterr().err
        assert code == 2
        assert err.strip().count("\n") == 0
        assert f"workload.value_size = {SC_WRITE_MAX + 1} (allowed: 0..{SC_WRITE_MAX}" in err, err
    for v in (1374, 1375, 5664, SC_WRITE_MAX):
        load(["target=mininet", "protocol=starcache", "write_ratio=0.1",
              f"workload.value_size={v}"])
    # a protocol whose writes are one packet is still held to one payload
    code = main(["run", "target=mininet", "protocol=hash", "write_ratio=0.1",
                 "workload.value_size=1500"])
    assert code == 2 and "allowed: 0..1362" in capsys.readouterr().err


def test_pipeline_params_follow_the_config() -> None:
    cfg = load(["protocol=starcache", "protocol.keys=256", "protocol.slots=256",
                "protocol.faithful=true"])
    assert lookup("starcache").pipeline_params(cfg) == \
        "keys=256;slots=256;faithful=1;stuck_us=20000"
    assert [s.name for s in ScStat][:2] == ["PARKED", "SERVED"]


def resized(overrides: list[str]):  # type: ignore[no-untyped-def]
    cfg = load(["protocol=starcache", *SMALL, "protocol.resize=true", *overrides])
    factory = sc.sim_controller_factory(cfg)
    with SimTarget(cfg) as t, SimEngine(cfg, t.workload, 4e5, 1, sc.pipeline_params(cfg)) as eng:
        st = eng.run(factory(eng), epoch_s=0.002)
        ctl = factory.last  # type: ignore[attr-defined]
        sw = ctl.plane.switch
        # keys still draining when the run ended, with what their queues hold
        ctl.draining_qlen = [sw.reg_read("qlen", it.idx) for it in ctl.items.values()
                             if sw.reg_read("state", it.idx) == sc.SC_STATE_DRAINING]
        return st, ctl


def test_the_cache_grows_while_nothing_overflows_and_shrinks_when_the_loop_is_too_long() -> None:
    """Dynamic sizing by the overflow ratio (theta 0.05%), one key per epoch:
    at 100 Gb/s the 32 keys never overflow, so the cache grows every epoch;
    at 0.5 Gb/s 32 cache packets make the loop too long (~15% of cached
    reads overflow), so it shrinks, draining its least read keys without
    stranding a parked read, until the overflow stops."""
    st, ctl = resized([])
    sizes = [n for _, n, _ in ctl.sizes]
    assert ctl.stats.shrunk == 0 and ctl.stats.grown >= 20 and sizes[-1] > 50
    assert all(r == 0.0 for _, _, r in ctl.sizes)
    st, ctl = resized(["topology.recirc_gbps=0.5", "protocol.min_size=4", "duration=0.08"])
    sizes = [n for _, n, _ in ctl.sizes]
    # every key shrunk out has left, or is leaving with nothing parked (the
    # run may end before the epoch that removes it)
    assert ctl.stats.shrunk >= 10 and ctl.draining_qlen.count(0) == len(ctl.draining_qlen)
    assert ctl.stats.evictions + len(ctl.draining_qlen) == ctl.stats.shrunk
    assert min(sizes) < 20 and ctl.sizes[0][2] > 0.05
    assert max(r for _, _, r in ctl.sizes[-5:]) < ctl.sizes[0][2] / 2   # it settled lower
    assert st.completed == st.issued        # drained keys answered every parked read


def test_resize_bounds_are_checked() -> None:
    with pytest.raises(Exception, match="min_size"):
        load(["protocol=starcache", "protocol.resize=true", "protocol.min_size=300",
              "protocol.max_size=200"])


def test_top_k_reports_replace_the_cache_after_a_popularity_swap() -> None:
    """protocol.replace: every report the servers' count-min sketches name
    their hottest keys; at 25 ms the 64 hottest and 64 coldest keys swap
    popularity, every cached key goes cold, and the reports bring the new
    hottest in (the old coldest). Without replacement the cache keeps its
    now-cold keys and the switch serves far less."""
    from netkv.sim.analysis import key_bytes_np

    swap = ["workload.dynamics.kind=swap", "workload.dynamics.count=64",
            "workload.dynamics.period_s=0.025", "duration=0.05", "protocol.epoch_ms=10",
            "protocol.report_ms=10"]   # run() calls the controller every 10 ms
    cfg = load(["protocol=starcache", *SMALL, *swap, "protocol.replace=true"])
    factory = sc.sim_controller_factory(cfg)
    with SimTarget(cfg) as t, SimEngine(cfg, t.workload, 4e5, 1, sc.pipeline_params(cfg)) as eng:
        st = eng.run(factory(eng), epoch_s=0.01)
        ctl = factory.last  # type: ignore[attr-defined]
        cached = [it.ck.key for it in ctl.active()]
    static, _, _ = run(swap, 4e5)
    assert ctl.stats.reports == 5 and ctl.stats.replaced >= 32
    assert st.completed == st.issued
    with SimTarget(cfg) as t:
        info = t.workload.rank_info()
        coldest = {bytes(k) for k in key_bytes_np(info["key"][-64:], t.workload.key_size)}
    assert sum(k in coldest for k in cached) >= 28, len(cached)   # the new hottest
    assert st.switch_replies > 1.5 * static.switch_replies, (st.switch_replies,
                                                              static.switch_replies)
    # what a report reads: "ok n=N <hex key>:<count> ..."
    assert sc.parse_topk("ok n=2 6b2d3830:80 6b2d3739:79") == [(b"k-80", 80), (b"k-79", 79)]
    assert sc.parse_topk("err unknown command") == []


def test_point_metrics_give_the_overflow_ratio_and_cache_sizes() -> None:
    cfg = load(["protocol=starcache", *SMALL, "protocol.resize=true",
                "topology.recirc_gbps=0.5", "protocol.min_size=4", "protocol.epoch_ms=2"])
    plugin = lookup("starcache")
    with SimTarget(cfg, controller_factory=plugin.sim_controller(cfg),
                   params=plugin.pipeline_params(cfg)) as t:
        res = t.run_point(4e5, seed=1)
    m = res.controller_metrics
    assert 0.01 < m["overflow_ratio"] < 0.5, m          # a slow loop overflows
    assert m["cache_size_min"] < m["cache_size_max"] == 32
    assert len(m["cache_size_epochs"]) == len(m["overflow_ratio_epochs"]) > 10
    assert m["cached_keys"] == m["cache_size_epochs"][-1] or m["cached_keys"] < 32


class _LoseOnePacketPerKey:
    """Epoch hook: at 10 ms every cached key's ``inloop`` counts one packet
    more than loops (as if one had been lost in the loop); records the
    switch's ``served`` count at each epoch."""

    def __init__(self, ctl: sc.StarCacheController) -> None:
        self.ctl, self.lost, self.served = ctl, False, []

    def epoch(self, engine: SimEngine, t_s: float) -> None:
        sw = self.ctl.plane.switch
        if not self.lost and t_s >= 0.01:
            self.lost = True
            for it in self.ctl.items.values():
                sw.reg_write("inloop", it.idx, sw.reg_read("inloop", it.idx) + 1)
        self.ctl.epoch(t_s)
        self.served.append((t_s, sw.reg_read("stats", int(ScStat.SERVED))))


@pytest.mark.parametrize("heal", [True, False])
def test_a_packet_lost_in_the_loop_is_recovered_by_the_watchdog(heal: bool) -> None:
    """A lost packet leaves ``inloop`` too high: the next revalidation marks
    the new packet stale too, and the key parks reads it never serves. The
    watchdog sees the full queue's head stand still, zeroes the count and
    refetches; without that (heal=False) the loop stops serving."""
    from netkv.sim.control import SimControlPlane

    cfg = load(["protocol=starcache", "servers=4", "keys=1000", "alpha=1.2",
                "write_ratio=0.1", "duration=0.06", "seed=3", "protocol.cache_size=16",
                "protocol.epoch_ms=2"])
    with SimTarget(cfg) as t, SimEngine(cfg, t.workload, 2e5, 1, sc.pipeline_params(cfg)) as eng:
        plane = SimControlPlane(eng)
        hot = sc.hottest(eng.workload, eng.ffi, eng.lib, 16)
        ctl = sc.StarCacheController(plane, cfg.protocol, hot, range(4, 4 + cfg.topology.clients),
                                     4)
        if not heal:
            ctl._nothing_looping = lambda item: None  # type: ignore[method-assign]
        ctl.start()
        hook = _LoseOnePacketPerKey(ctl)
        eng.run(hook, epoch_s=0.002)
    served = dict(hook.served)
    before = served[min(t for t in served if t >= 0.01)] - served[min(served)]
    after = served[max(served)] - served[min(t for t in served if t >= 0.04)]
    print(f"heal={heal}: served {before} in the 10 ms before the loss, {after} in the last 20 ms")
    if heal:
        assert after > 0.5 * before * 2, (before, after)   # 20 ms after vs 10 ms before
    else:
        assert after < 0.1 * before, (before, after)


def test_multi_packet_items_loop_as_fragments_and_are_reassembled() -> None:
    """Every value 5664 B (the paper's Fig. 17 item of 4 packets: 16 B key,
    1422 B of value per packet): each cached key loops as 4 cache packets
    (FRAG 0-3), a parked read is answered by 4 visits and completes when the
    client has all 4. The loop is 4 x longer than with one packet per item,
    so the same 8 keys serve fewer reads at a slow port."""
    big = ["workload.key_size=16", "workload.value_size=5664"]
    st, stats, (ctl, share) = run(big, 2e5, cache=8)
    assert ctl.stats.fetch_ok == 8
    assert st.completed == st.issued and st.timeouts == 0
    # a reply packet per visit: 4 per parked read, less those of the reads
    # still parked at the end (8 keys x 16 slots); switch_replies counts the
    # requests the switch answered (their 4th visit completes them), as
    # kvclient does (docs/mininet.md), not the packets (it counted every
    # visit: 4 per read)
    assert 0 <= stats["served"] - 4 * st.switch_replies <= 3 * 8
    assert 4 * (stats["parked"] - 8 * 16) <= stats["served"] <= 4 * stats["parked"]
    assert stats["parked"] > 0.5 * share * st.issued
    assert st.retries == 0          # no fragment lost: no gap, no correction
    one, ostats, _ = run(["workload.key_size=16", "workload.value_size=1416",
                          "topology.recirc_gbps=2"], 2e5, cache=8)
    four, fstats, _ = run([*big, "topology.recirc_gbps=2"], 2e5, cache=8)
    assert fstats["overflow"] > 2 * max(ostats["overflow"], 1)
    assert fstats["served"] / 4 < 0.8 * ostats["served"]   # reads answered by the loop


def test_a_lost_fragment_is_recovered_by_the_clients_retry() -> None:
    """1% of packets lost on the links: a read that misses a fragment sends
    again after its timeout (or, on a gap among its FLAG visits, asks the
    server), and every read completes."""
    st, stats, _ = run(["workload.key_size=16", "workload.value_size=5664",
                        "target.faults.loss=0.01", "topology.timeout_us=1000",
                        "topology.retries=5"], 2e5, cache=8)
    assert st.retries > 0
    assert st.completed == st.issued, (st.completed, st.issued, st.timeouts)


class _Regs:
    """The switch as the StarCache controller sees it: registers by name."""

    def __init__(self) -> None:
        self.regs: dict[tuple[str, int], int] = {}

    def reg_read(self, name: str, idx: int) -> int:
        return self.regs.get((name, idx), 0)

    def reg_write(self, name: str, idx: int, value: int) -> None:
        self.regs[(name, idx)] = value

    def table_add(self, *args: object) -> None:
        pass

    def table_delete(self, *args: object) -> None:
        pass

    def mcast_set(self, *args: object) -> None:
        pass


class _Plane:
    def __init__(self) -> None:
        self._switch, self.sent, self.inbox = _Regs(), [], []

    @property
    def switch(self) -> _Regs:
        return self._switch

    def cpu_messages(self, max_packets: int = 4096) -> list:
        batch, self.inbox = self.inbox, []
        return batch

    def packet_out(self, msg, dst: int) -> None:  # type: ignore[no-untyped-def]
        self.sent.append(msg)

    controller_node, recirc_port = 9, 99

    def port_of(self, node: int) -> int:
        return node


def test_a_key_refetched_by_the_watchdog_is_not_given_up_on_a_retry() -> None:
    """MAX_FETCHES bounds one fetch's retries, not the fetches of a key's
    life: a key the watchdog fetched again four times (each answered OK)
    whose next fetch is refused (RETRY, a write in flight) is fetched again.
    Before, the count was never reset: that RETRY gave the key up (its
    lookup entry removed), and overlapping writes leave a key for the
    watchdog often (docs/starcache.md, "Coherence")."""
    from netkv.constants import SC_STATE_INVALID, SC_STATE_VALID
    from netkv.wire.codec import Msg, Proto, Result, StarcacheOp

    proto = load(["protocol=starcache"]).protocol
    plane = _Plane()
    ck = sc.CacheKey(b"k-hot", 1, 0)
    ctl = sc.StarCacheController(plane, proto, [ck], range(0))  # type: ignore[arg-type]
    ctl.start()
    sw, item = plane.switch, ctl.items[ck.key]

    def answer(result: Result) -> None:
        req = plane.sent[-1].req_id
        plane.inbox.append((0, Msg(proto=Proto.STARCACHE, op=StarcacheOp.F_REP, req_id=req,
                                   frag_cnt=1 if result == Result.OK else 0, result=result)))
        ctl.epoch(0.0)

    sw.reg_write("state", item.idx, SC_STATE_VALID)
    answer(Result.OK)
    for _ in range(sc.MAX_FETCHES):
        sw.reg_write("state", item.idx, SC_STATE_INVALID)   # a write's reply without value
        ctl.epoch(0.0)                                       # the watchdog fetches again
        assert item.fetch_req is not None
        sw.reg_write("state", item.idx, SC_STATE_VALID)
        answer(Result.OK)
    sw.reg_write("state", item.idx, SC_STATE_INVALID)
    ctl.epoch(0.0)
    sw.reg_write("pending_writes", item.idx, 1)              # a write in flight: refused
    answer(Result.RETRY)
    assert ck.key in ctl.items and ctl.stats.given_up == 0
    assert item.fetch_req is not None                         # fetched again


def test_a_lost_fetch_is_sent_again() -> None:
    """A fetch whose F_REQ or F_REP is lost left its key INVALID for the
    rest of the run (the watchdog skips a key with a fetch outstanding):
    after FETCH_TIMEOUT_EPOCHS unanswered epochs it is sent again, at most
    MAX_FETCHES times before the key is given up."""
    proto = load(["protocol=starcache"]).protocol
    plane = _Plane()
    ck = sc.CacheKey(b"k-hot", 1, 0)
    ctl = sc.StarCacheController(plane, proto, [ck], range(0))  # type: ignore[arg-type]
    ctl.start()
    item = ctl.items[ck.key]
    first = item.fetch_req
    assert first is not None and len(plane.sent) == 1
    for _ in range(sc.FETCH_TIMEOUT_EPOCHS):
        ctl.epoch(0.0)                     # unanswered, not yet lost
    assert item.fetch_req == first and len(plane.sent) == 1
    ctl.epoch(0.0)
    assert item.fetch_req not in (None, first) and len(plane.sent) == 2
    assert ctl.stats.fetch_lost == 1
    for _ in range(sc.MAX_FETCHES * (sc.FETCH_TIMEOUT_EPOCHS + 1)):
        ctl.epoch(0.0)                     # never answered: given up, not resent forever
    assert ck.key not in ctl.items and ctl.stats.given_up == 1
    assert len(plane.sent) == sc.MAX_FETCHES


def test_a_key_back_in_its_old_slot_refuses_its_old_fetch_reply() -> None:
    """A fetch's F_REP is taken only if its LAT is the slot's current stamp
    (SC_LAT(idx, wcount)). A key removed and inserted again at the same
    slot (the free list is last-in-first-out) with no write counted there
    meanwhile kept the stamp: a late F_REP of its earlier fetch, read before
    a write acknowledged while the key was uncached, matched and looped the
    older value. Each insert moves the slot's wcount on, so the old stamp
    matches no more (a review's find; on the old code wcount stays)."""
    proto = load(["protocol=starcache"]).protocol
    plane = _Plane()
    ck = sc.CacheKey(b"k-hot", 1, 0)
    ctl = sc.StarCacheController(plane, proto, [ck], range(0))  # type: ignore[arg-type]
    ctl.start()
    idx = ctl.items[ck.key].idx
    first = plane.switch.regs.get(("wcount", idx), 0)
    ctl._remove(ctl.items[ck.key])
    ctl.insert(ck)
    assert ctl.items[ck.key].idx == idx                       # the same slot
    assert plane.switch.regs[("wcount", idx)] == first + 1

    # an F_REP stamped SC_LAT(idx, first) is refused now (the C pipeline's
    # freshness rule: test_starcache.c test_write_number_across_slots)
