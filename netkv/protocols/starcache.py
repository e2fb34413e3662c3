"""StarCache's controller (one class for every target) and its pipeline knobs.

The data plane (hostapps/src/pipeline/starcache.c) keeps a cached item in a
*cache packet* looping through the recirculation port and parks reads of
cached keys in per-key queues; each pass of the cache packet answers the
head of its key's queue (docs/starcache.md). This controller decides which
keys are cached, through the table and register names of docs/starcache.md
and the ControlPlane only:

- start: one PRE group per client node and for the controller,
  ``{node's port, recirculation port}`` (group ``sc_mcast_group(node)``),
  so a served reply and its copy back into the loop leave together; then the
  ``cache_size`` hottest keys (the paper's static cache of 32) are
  installed (``lookup`` entry, INVALID) and fetched: an F_REQ packet-out to
  the key's home, whose F_REP, passing the switch, validates the key and
  becomes its cache packet.
- every epoch: drain the CPU channel (F_REPs: OK = the cache packet is
  looping; RETRY = the switch refused it, a write was in flight: fetch
  again), and the lost-cache-packet watchdog (digest 8.6): a cached key
  whose queue stayed full (``qlen == S``) over a whole epoch, or that is
  INVALID with no write in flight and no fetch outstanding, is fetched
  again; when the full queue's head did not move either, no packet of the
  key is looping, and its count of packets in the loop (``inloop``, which a
  lost packet leaves too high) is zeroed first.

- with ``resize``, dynamic cache sizing (digest section 4): each epoch the
  overflow ratio (reads of cached keys sent to a server for lack of a queue
  slot / reads of cached keys, over the epoch) above ``theta`` shrinks the
  cache by one (the cached key with the fewest reads that epoch drains out,
  DRAINING), else it grows by one (the next hottest uncached key), between
  ``min_size`` and ``max_size``; the switch's per-key counters are zeroed
  after each reading, as the paper's reports are.

- with ``replace``, top-k replacement (digest section 4): every
  ``report_ms`` each server reports its hottest keys from a count-min sketch
  of the reads it served (``topk``, host logic) and zeroes it; while the
  hottest reported uncached key beats the cached key read least since the
  last report (the switch's ``pop``), the latter drains out and the former
  comes in. Resizing then grows by the hottest reported uncached key.

Not yet: multi-packet items.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from netkv.config.base import MAX_VNODES, Pos, ProtocolBase, Ring
from netkv.constants import (
    SC_DEFAULT_KEYS,
    SC_DEFAULT_SLOTS,
    SC_DEFAULT_STUCK_US,
    SC_ITEM_BYTES,
    SC_MAX_SLOTS_TOTAL,
    SC_STATE_DRAINING,
    SC_STATE_INVALID,
    SC_STATE_VALID,
    SC_WRITE_MAX,
    ScStat,
    sc_mcast_group,
)
from netkv.protocols.base import ControlPlane, Controller
from netkv.protocols.plugin import (
    P4Program,
    P4Semantics,
    Params,
    ProtocolPlugin,
    RegisterCells,
    param_int,
    servers_register,
)
from netkv.wire import djb2
from netkv.wire.codec import STARCACHE_PORT, Msg, Proto, Result, StarcacheOp, starcache_hkey

MAX_FETCHES = 4  # fetches of one key before it is given up
#: epochs a fetch may go unanswered before it is taken as lost (its F_REQ
#: or F_REP dropped) and sent again; a round trip takes microseconds
FETCH_TIMEOUT_EPOCHS = 2
# where the switch counts what it refuses at the trust boundary (docs/security.md)
REFUSALS = {"host_server_op": ("stats", int(ScStat.HOST_SERVER_OP)),
            "forged_fields": ("stats", int(ScStat.FORGED_FIELDS)),
            "wrong_home": ("stats", int(ScStat.WRONG_HOME))}


SC_HEADER_BYTES = 28 + 6   # header and payload preamble (docs/starcache.md "Wire")
# the P4 program's loop pair (out, in): data ports above the rack's nodes and
# BMv2's CPU port, within v1model's 9-bit ports (-DSC_LOOP_OUT/-DSC_LOOP_IN)
SC_LOOP_OUT, SC_LOOP_IN = 510, 511


class StarCacheProtocol(ProtocolBase):
    """StarCache: variable-length items cached in looping packets (docs/starcache.md)."""

    name: Literal["starcache"]
    max_servers: int = Field(256, ge=1)
    cache_size: int = Field(32, ge=0)       # keys cached (the paper's static 32)
    keys: int = Field(SC_DEFAULT_KEYS, ge=1)   # request-table keys (CacheIdx values)
    slots: int = Field(SC_DEFAULT_SLOTS, ge=1)  # S: parked reads per key
    faithful: bool = False                  # the paper's 1-bit invalidation flag
    # a key's counted writes are taken as lost when no write has reached it
    # for this long (longer than any write's round trip on the target)
    stuck_ms: Annotated[float, Field(gt=0.0, le=2_000_000.0)] = SC_DEFAULT_STUCK_US / 1000
    epoch_ms: Pos = 100.0                   # controller epoch (watchdog, fetch retries)
    # dynamic cache sizing by the overflow ratio (the paper's dynamic run:
    # theta 0.05%, minimum 32); off = the static cache of the evaluation
    resize: bool = False
    theta: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0005
    min_size: int = Field(32, ge=0)
    max_size: int = Field(256, ge=1)
    # top-k replacement from the servers' count-min sketches every report_ms
    # (the paper's T = 1 s); off = the cache keeps the keys it started with
    replace: bool = False
    report_ms: Pos = 1000.0
    virtual_nodes: int = Field(16, ge=1, le=MAX_VNODES)
    ring: Ring = "consistent"

    def payload_bytes(self, key_size: int, value_size: int) -> int:
        """The largest packet of a W_REQ: the 28 B header, the 6 B preamble,
        key and value, or one fragment of them (at most SC_ITEM_BYTES) where
        the item takes several packets and the client can split it
        (SC_WRITE_MAX, docs/starcache.md "Multi-packet items")."""
        if key_size + value_size > SC_ITEM_BYTES and value_size <= SC_WRITE_MAX:
            return SC_HEADER_BYTES + SC_ITEM_BYTES
        return SC_HEADER_BYTES + key_size + value_size

    @model_validator(mode="after")
    def _fits(self) -> "StarCacheProtocol":
        if self.keys * self.slots > SC_MAX_SLOTS_TOTAL:
            raise ValueError(f"protocol.keys x protocol.slots = {self.keys * self.slots} "
                             f"(allowed: at most {SC_MAX_SLOTS_TOTAL}, the request table's slots)")
        if self.cache_size > self.keys:
            raise ValueError(f"protocol.cache_size = {self.cache_size} (allowed: 0..{self.keys}, "
                             "at most protocol.keys: each cached key needs a CacheIdx)")
        if self.resize and not self.min_size <= self.max_size <= self.keys:
            raise ValueError(f"protocol.min_size = {self.min_size}, protocol.max_size = "
                             f"{self.max_size} with protocol.resize=true (allowed: min_size <= "
                             f"max_size <= protocol.keys = {self.keys})")
        return self


def pipeline_params(cfg: RunConfig) -> str:
    proto = cfg.protocol
    assert isinstance(proto, StarCacheProtocol)
    return (f"keys={proto.keys};slots={proto.slots};faithful={int(proto.faithful)};"
            f"stuck_us={max(1, round(proto.stuck_ms * 1000))}")


def hkey_words(key: bytes) -> list[int]:
    """The ``lookup`` table key: HKEY as [high, low] 64-bit words."""
    h = starcache_hkey(key)
    return [h >> 64, h & (2**64 - 1)]


@dataclass
class CacheKey:
    key: bytes
    keyhash: int      # the simulator's store key (not on the wire)
    home: int


@dataclass
class Item:
    ck: CacheKey
    idx: int
    fetch_req: int | None = None
    fetch_epochs: int = 0   # epochs the outstanding fetch has waited
    fetches: int = 0
    looping: bool = False   # an F_REP came back OK: its cache packet is in the loop
    full_epochs: int = 0
    front: int = -1         # the queue's head at the last epoch


@dataclass
class StarCacheStats:
    inserts: int = 0
    fetches: int = 0
    fetch_ok: int = 0
    fetch_retry: int = 0
    refetches: int = 0      # by the watchdog
    fetch_lost: int = 0     # fetches unanswered for FETCH_TIMEOUT_EPOCHS, sent again
    given_up: int = 0
    evictions: int = 0
    grown: int = 0          # by the overflow ratio
    shrunk: int = 0
    reports: int = 0        # top-k rounds (replace)
    replaced: int = 0       # cached keys swapped for hotter reported ones


class StarCacheController(Controller):
    def __init__(self, plane: ControlPlane, proto: StarCacheProtocol, hot: list[CacheKey],
                 client_nodes: range, servers: int = 0) -> None:
        super().__init__(plane)
        self.proto = proto
        self.hot = hot
        self.client_nodes = client_nodes
        self.servers = servers
        self.pop_acc: dict[bytes, int] = {}   # reads of each cached key since the last report
        self.last_report_s = 0.0
        self.items: dict[bytes, Item] = {}
        self.by_req: dict[int, Item] = {}
        self.free_idx = list(range(proto.keys - 1, -1, -1))
        self.next_req = 1
        self.stats = StarCacheStats()
        self.last_hits = self.last_overflow = 0
        self.reported: list[CacheKey] = []   # the last report's uncached keys, hottest first
        self.sizes: list[tuple[float, int, float]] = []  # (t, cached keys, overflow ratio)
        self.point_base = (0, 0)   # hits, overflow when the point began
        self.point_sizes = 0

    def start(self) -> None:
        plane, sw = self.plane, self.plane.switch
        for node in [*self.client_nodes, plane.controller_node]:
            sw.mcast_set(sc_mcast_group(node), [plane.port_of(node), plane.recirc_port])
        for ck in self.hot[:self.proto.cache_size]:
            self.insert(ck)

    def insert(self, ck: CacheKey) -> None:
        idx = self.free_idx.pop()
        sw = self.plane.switch
        # the slot's write number moves on: a fetch of an earlier tenant of
        # this slot (this key, maybe, removed and back with no write counted
        # here since) stamped the old wcount, and its late F_REP would match
        # it and loop the value it read before a write acknowledged since.
        # No lookup entry maps to a free slot, so nothing counts here meanwhile
        sw.reg_write("wcount", idx, (sw.reg_read("wcount", idx) + 1) & 0xFFFFFFFF)
        # INVALID until fetched; writes to the key go to its home (docs/security.md)
        sw.table_add("lookup", hkey_words(ck.key), [idx, ck.home])
        item = Item(ck, idx)
        self.items[ck.key] = item
        self.stats.inserts += 1
        self._fetch(item)

    def evict(self, key: bytes) -> None:
        """DRAINING: reads go to the server and the cache packet serves the
        parked ones; the entry goes once the queue is empty (next epochs)."""
        item = self.items[key]
        self.plane.switch.reg_write("state", item.idx, SC_STATE_DRAINING)

    def _fetch(self, item: Item) -> None:
        req = self.next_req
        self.next_req = self.next_req % 0xFFFFFFFE + 1
        ck = item.ck
        msg = Msg(proto=Proto.STARCACHE, op=StarcacheOp.F_REQ, key=ck.key, keyhash=ck.keyhash,
                  server_id=ck.home, req_id=req, hkey=starcache_hkey(ck.key), nkeys=1)
        if item.fetch_req is not None:
            self.by_req.pop(item.fetch_req, None)
        item.fetch_req = req
        item.fetch_epochs = 0
        item.fetches += 1
        self.by_req[req] = item
        self.stats.fetches += 1
        self.plane.packet_out(msg, ck.home)

    def epoch(self, t_s: float) -> None:
        self._drain_cpu()
        self._drained()
        self._watchdog()
        if not (self.proto.resize or self.proto.replace):
            return
        pops = self._read_pops()
        if self.proto.replace and t_s - self.last_report_s >= self.proto.report_ms / 1e3 - 1e-9:
            self.last_report_s = t_s
            self._report()
        if self.proto.resize:
            self._resize(t_s, pops)

    def active(self) -> list[Item]:
        """Cached keys not being evicted."""
        sw = self.plane.switch
        return [it for it in self.items.values()
                if sw.reg_read("state", it.idx) != SC_STATE_DRAINING]

    def _read_pops(self) -> dict[bytes, int]:
        """Reads of each cached key (not draining) this epoch, from ``pop``,
        zeroed after each reading (the paper's counters are reset after each
        report); also summed since the last top-k report."""
        sw = self.plane.switch
        active = self.active()
        pops = {it.ck.key: sw.reg_read("pop", it.idx) for it in active}
        for it in active:
            sw.reg_write("pop", it.idx, 0)
            self.pop_acc[it.ck.key] = self.pop_acc.get(it.ck.key, 0) + pops[it.ck.key]
        return pops

    def _report(self) -> None:
        """Top-k replacement: the servers' reports against the cached keys'
        reads since the last report."""
        reported: list[tuple[int, bytes, int]] = []   # (count, key, home)
        for server in range(self.servers):
            reported += [(n, key, server)
                         for key, n in parse_topk(self.plane.server_ctl(server, "topk"))]
        pops, self.pop_acc = self.pop_acc, {}
        self.stats.reports += 1
        uncached = sorted((r for r in reported if r[1] not in self.items), reverse=True)
        self.reported = [CacheKey(key, djb2(key), home) for _, key, home in uncached]
        victims = sorted(self.active(), key=lambda it: pops.get(it.ck.key, 0))
        for (count, key, home), victim in zip(uncached, victims):
            if count <= pops.get(victim.ck.key, 0) or not self.free_idx:
                break
            self.evict(victim.ck.key)
            self.insert(CacheKey(key, djb2(key), home))
            self.stats.replaced += 1

    def _resize(self, t_s: float, pops: dict[bytes, int]) -> None:
        sw = self.plane.switch
        hits, overflow = sw.reg_read("hits", 0), sw.reg_read("overflow", 0)
        d_hits, d_over = hits - self.last_hits, overflow - self.last_overflow
        self.last_hits, self.last_overflow = hits, overflow
        active = self.active()
        ratio = d_over / d_hits if d_hits else 0.0
        self.sizes.append((t_s, len(active), ratio))
        if not d_hits:
            return
        if ratio > self.proto.theta:
            if len(active) > self.proto.min_size:
                # a key that came in this epoch has no count yet: not a victim
                victim = min(active, key=lambda it: pops.get(it.ck.key, float("inf")))
                self.evict(victim.ck.key)
                self.stats.shrunk += 1
        elif len(active) < self.proto.max_size and self.free_idx:
            pool = self.reported if self.proto.replace else self.hot
            nxt = next((ck for ck in pool if ck.key not in self.items), None)
            if nxt is not None:
                self.insert(nxt)
                self.stats.grown += 1

    def _drain_cpu(self) -> None:
        while batch := self.plane.cpu_messages():
            for _src, msg in batch:
                if msg.proto != Proto.STARCACHE or msg.op != StarcacheOp.F_REP:
                    continue
                item = self.by_req.pop(msg.req_id, None)
                if item is None:
                    continue
                item.fetch_req = None
                if msg.result == Result.OK and msg.frag_cnt:
                    item.looping = True
                    item.fetches = 0   # MAX_FETCHES bounds one fetch's retries
                    self.stats.fetch_ok += 1
                elif self.plane.switch.reg_read("state", item.idx) == SC_STATE_VALID:
                    # refused because a write's reply revalidated the key
                    # meanwhile (its newer value loops): nothing to fetch
                    item.looping = True
                    item.fetches = 0
                    self.stats.fetch_retry += 1
                else:
                    self.stats.fetch_retry += 1
                    self._refetch(item)

    def _refetch(self, item: Item) -> None:
        if item.fetches >= MAX_FETCHES:
            self.stats.given_up += 1
            self._remove(item)
            return
        self._fetch(item)

    def _drained(self) -> None:
        sw = self.plane.switch
        for item in list(self.items.values()):
            if (sw.reg_read("state", item.idx) == SC_STATE_DRAINING
                    and sw.reg_read("qlen", item.idx) == 0):
                self._remove(item)
                self.stats.evictions += 1

    def _remove(self, item: Item) -> None:
        self.plane.switch.table_delete("lookup", hkey_words(item.ck.key))
        if item.fetch_req is not None:
            self.by_req.pop(item.fetch_req, None)
        del self.items[item.ck.key]
        self.free_idx.append(item.idx)

    def _watchdog(self) -> None:
        """A lost cache packet parks reads until the queue is full (then they
        overflow to the server), a write whose reply carried no value leaves
        the key INVALID with nothing looping: fetch again (digest 8.6)."""
        sw = self.plane.switch
        for item in list(self.items.values()):
            if item.fetch_req is not None:
                item.fetch_epochs += 1
                if item.fetch_epochs > FETCH_TIMEOUT_EPOCHS:
                    # lost: without this the key stayed INVALID for the run
                    self.stats.fetch_lost += 1
                    self._refetch(item)
                continue
            state = sw.reg_read("state", item.idx)
            full = sw.reg_read("qlen", item.idx) >= self.proto.slots
            front, item.front = item.front, sw.reg_read("front", item.idx)
            item.full_epochs = item.full_epochs + 1 if full else 0
            stuck = (state == SC_STATE_INVALID and item.looping
                     and sw.reg_read("pending_writes", item.idx) == 0)
            if item.full_epochs >= 2 or stuck:
                if item.full_epochs >= 2 and front == item.front:
                    self._nothing_looping(item)
                if state == SC_STATE_VALID:
                    # the switch takes a fetch's reply only for a key that is
                    # not VALID (a late one would loop an older value); the
                    # key's packets still looping drop themselves
                    sw.reg_write("state", item.idx, SC_STATE_INVALID)
                item.full_epochs = 0
                self.stats.refetches += 1
                self._fetch(item)

    def _nothing_looping(self, item: Item) -> None:
        """A full queue whose head has not moved for an epoch: no packet of
        the key is looping (each pass serves the head), whatever ``inloop``
        says (a packet lost in the loop leaves it too high): zeroed, so that
        the refetched packet is not taken for an older one."""
        sw = self.plane.switch
        sw.reg_write("inloop", item.idx, 0)
        sw.reg_write("stale", item.idx, 0)

    def point_metrics(self) -> dict[str, Any]:
        """The point's overflow ratio (reads of cached keys sent to a server
        for lack of a queue slot / reads of cached keys, since the last
        point), the keys cached at its end, and with ``resize`` the least and
        most keys cached at an epoch (docs/starcache.md "Dataset")."""
        sw = self.plane.switch
        hits, overflow = sw.reg_read("hits", 0), sw.reg_read("overflow", 0)
        d_hits, d_over = hits - self.point_base[0], overflow - self.point_base[1]
        self.point_base = (hits, overflow)
        start, self.point_sizes = self.point_sizes, len(self.sizes)
        sizes = [n for _, n, _ in self.sizes[start:]]
        return {"overflow_ratio": d_over / d_hits if d_hits else 0.0,
                "cached_keys": len(self.active()),
                "cache_size_min": min(sizes) if sizes else math.nan,
                "cache_size_max": max(sizes) if sizes else math.nan,
                "replaced_keys": self.stats.replaced,
                # per resizing epoch since the last point: keys cached, overflow ratio
                "cache_size_epochs": sizes,
                "overflow_ratio_epochs": [r for _, _, r in self.sizes[start:]]}

    def switch_stats(self) -> dict[str, int]:
        sw = self.plane.switch
        out = {s.name.lower(): sw.reg_read("stats", int(s)) for s in ScStat}
        out["hits"] = sw.reg_read("hits", 0)
        out["overflow"] = sw.reg_read("overflow", 0)
        return out


def parse_topk(reply: str) -> list[tuple[bytes, int]]:
    """A server's ``topk`` reply ("ok n=N <hex key>:<count> ...") as (key,
    count) pairs; a reply that is not "ok" reports nothing."""
    words = reply.split()
    if not words or words[0] != "ok":
        return []
    out = []
    for word in words[2:]:
        hexkey, _, count = word.partition(":")
        try:
            out.append((bytes.fromhex(hexkey), int(count)))
        except ValueError:
            continue
    return out


# --- on the simulator ---------------------------------------------------------------------


def candidates(proto: StarCacheProtocol) -> int:
    """How many of the hottest keys the controller may cache."""
    return max(proto.cache_size, proto.max_size if proto.resize else 0)


def hottest(workload: "Workload", ffi: object, lib: object, count: int) -> list[CacheKey]:
    """The ``count`` most popular keys (the workload's rank table)."""
    info = workload.rank_info()[:count]
    size = workload.key_size
    buf = ffi.new("uint8_t[]", size)  # type: ignore[attr-defined]
    out = []
    for rec in info:
        lib.nk_key_bytes(int(rec["key"]), size, buf)  # type: ignore[attr-defined]
        out.append(CacheKey(bytes(ffi.buffer(buf, size)),  # type: ignore[attr-defined]
                            int(rec["keyhash"]), int(rec["home"])))
    return out


def sim_controller_factory(cfg: RunConfig):  # type: ignore[no-untyped-def]
    from netkv.sim.control import SimControlPlane, SimEpochs

    proto = cfg.protocol
    assert isinstance(proto, StarCacheProtocol)
    memo: list[tuple["Workload", list[CacheKey]]] = []

    def factory(engine: "SimEngine") -> "SimEpochs":
        plane = SimControlPlane(engine)
        wl = engine.workload
        if not memo or memo[0][0] is not wl:  # the workload is shared by every load point
            memo[:] = [(wl, hottest(wl, engine.ffi, engine.lib, candidates(proto)))]
        top = engine.cfg.topology
        controller = StarCacheController(plane, proto, memo[0][1],
                                         range(top.servers, top.servers + top.clients),
                                         top.servers)
        controller.start()
        factory.last = controller  # type: ignore[attr-defined]
        return SimEpochs(controller)

    return factory


def rack_controller_factory(cfg: RunConfig):  # type: ignore[no-untyped-def]
    """Real racks (target=mininet): ``factory(plane) -> StarCacheController``
    caching the hottest keys of the workload the clients draw from (the
    target calls ``start()``)."""
    proto = cfg.protocol
    assert isinstance(proto, StarCacheProtocol)
    top = cfg.topology

    def factory(plane: ControlPlane) -> StarCacheController:
        from netkv.sim.engine import Workload

        with Workload.from_config(cfg) as wl:
            hot = hottest(wl, wl.ffi, wl.lib, candidates(proto))
        return StarCacheController(plane, proto, hot,
                                   range(top.servers, top.servers + top.clients), top.servers)

    return factory


# --- on BMv2 (p4src/starcache/starcache.p4) ----------------------------------------------


def p4_defines(params: Params) -> dict[str, int]:
    """starcache.c's params as the P4 program's compile-time constants."""
    keys = param_int(params, "keys", SC_DEFAULT_KEYS)
    slots = param_int(params, "slots", SC_DEFAULT_SLOTS)
    faithful = param_int(params, "faithful", 0)
    stuck = param_int(params, "stuck_us", SC_DEFAULT_STUCK_US)
    if keys < 1 or slots < 1 or keys * slots > SC_MAX_SLOTS_TOTAL or faithful not in (0, 1) \
            or not 1 <= stuck <= 0x7FFFFFFF:
        raise ValueError(f"starcache keys {keys} x slots {slots} must be in 1..{SC_MAX_SLOTS_TOTAL}, "
                         f"faithful {faithful} 0 or 1, stuck_us {stuck} in 1..2^31-1")
    return {"SC_KEYS": keys, "SC_SLOTS": slots, "SC_FAITHFUL": faithful, "SC_STUCK_US": stuck,
            "SC_LOOP_OUT": SC_LOOP_OUT, "SC_LOOP_IN": SC_LOOP_IN}


def p4_initial_registers(n_servers: int, params: Params) -> list[tuple[str, int, int]]:
    """What starcache.c's init leaves non-zero: n_servers, and ``ack`` 1 for
    every key (no visit yet)."""
    keys = p4_defines(params)["SC_KEYS"]
    return [*servers_register(n_servers, params), *(("ack", i, 1) for i in range(keys))]


#: what a ``lookup`` insert resets in starcache.c (reset_key): the key starts
#: INVALID with an empty queue and nothing in the loop
KEY_RESET = (("state", SC_STATE_INVALID), ("pending_writes", 0), ("pop", 0), ("qlen", 0),
             ("front", 0), ("rear", 0), ("ack", 1), ("inloop", 0), ("stale", 0), ("write_ts", 0),
             ("last_src", 0), ("last_seq", 0), ("wmask", 0))


class StarCacheP4(P4Semantics):
    """What starcache.c does inside ``table_add``/``table_del`` that a P4
    table cannot: an inserted key's registers are reset, a deleted key's
    cache packet drops itself (INVALID)."""

    def __init__(self) -> None:
        self.idx: dict[tuple[int, ...], int] = {}

    def before_table_add(self, regs: RegisterCells, table: str, key: Sequence[int],
                         args: Sequence[int]) -> None:
        if table != "lookup":
            return
        idx = int(args[0])
        self.idx[tuple(int(k) for k in key)] = idx
        regs.write([(name, idx, value) for name, value in KEY_RESET])

    def after_table_delete(self, regs: RegisterCells, table: str, key: Sequence[int]) -> None:
        idx = self.idx.pop(tuple(int(k) for k in key), None) if table == "lookup" else None
        if idx is not None:
            regs.write([("state", idx, SC_STATE_INVALID)])


PLUGIN = ProtocolPlugin(
    name="starcache",
    summary="StarCache: variable-length items cached in packets looping through the switch",
    targets=("sim", "mininet", "testbed"),
    config=StarCacheProtocol,
    wire=Proto.STARCACHE,
    udp_port=STARCACHE_PORT,
    pipeline_params=pipeline_params,
    sim_controller=sim_controller_factory,
    rack_controller=rack_controller_factory,
    p4=P4Program("starcache/starcache.p4", defines=p4_defines,
                 initial_registers=p4_initial_registers, semantics=StarCacheP4,
                 loop_ports=(SC_LOOP_OUT, SC_LOOP_IN)),
    refusals=REFUSALS,
)


if TYPE_CHECKING:
    from netkv.config.schema import RunConfig
    from netkv.sim.engine import SimEngine, Workload
