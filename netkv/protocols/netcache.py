"""NetCache's controller (one class for every target) and its pipeline knobs.

The data plane (hostapps/src/pipeline/netcache.c, p4src/netcache/) answers
reads of cached keys, invalidates on writes and refreshes from the servers'
write replies; it reports hot uncached keys (count-min sketch + Bloom filter)
to the controller. This controller decides *which* keys are cached, using
only the table and register names of docs/netcache.md:

- ``prewarmed`` mode (default; the Pegasus paper's evaluation): before
  traffic, the ``cache_items`` hottest keys whose value fits
  ``max_value_bytes`` are installed directly (table entry, then
  ``cache_vlen`` and ``cache_valid``). Every server preloads every key with
  the canonical value (zero bytes of the workload's size) and the value
  registers start at zero, so the slot holds exactly the servers' value.
- ``cold`` mode: the cache starts empty and fills from the hot-key reports.

Every epoch (both modes), as NetCache's controller does: drain the CPU
channel (hot-key reports and CACHE_UPDATE_ACKs), estimate each reported
key's reads this epoch from the count-min sketch, read and reset the cached
keys' ``cache_hits``, insert reported keys into free slots or in place of
cached keys with fewer hits, then clear the sketch and the Bloom filter.
Insertion is the fetch sequence (docs/netcache.md): table entry (invalid),
packet-out CACHE_UPDATE to the key's home, the server answers through the
switch, which fills the slot unless a write intervened and acks to the CPU.
Keys whose value is larger than ``max_value_bytes`` are never cached.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from netkv.config.base import MAX_VNODES, PosMillis, ProtocolBase, Ring
from netkv.constants import NC_CM_ROWS, NC_FETCH_CLIENT, NC_HASH_ROW_MUL, NC_HASH_SEED0, NC_HASH_SEED1
from netkv.protocols.base import ControlPlane, Controller
from netkv.protocols.plugin import (
    P4Program,
    P4Semantics,
    Params,
    ProtocolPlugin,
    RegisterCells,
    param_int,
)
from netkv.wire.codec import NETCACHE_KEY_LEN, NETCACHE_PORT, Msg, NetcacheOp, Proto, Result

CM_ROWS = NC_CM_ROWS            # count-min rows (pipeline constant)
FETCH_CLIENT = NC_FETCH_CLIENT  # client_id of a controller fetch (cache_wcli marker)
FETCH_TIMEOUT_EPOCHS = 2  # an unanswered fetch is resent after this many epochs
MAX_FETCHES = 4           # fetches of one key before it is given up
# What the switch refused at the trust boundary (docs/security.md):
# reason -> (register, index).
REFUSALS = {"host_server_op": ("stats", 10)}


class NetCacheProtocol(ProtocolBase):
    """NetCache (SOSP'17), the Pegasus paper's baseline (docs/netcache.md)."""

    name: Literal["netcache"]
    max_servers: int = Field(256, ge=1)
    # prewarmed: the cache_items hottest cacheable keys are cached before
    # traffic (the Pegasus paper's evaluation); cold: the cache starts empty
    # and fills from the switch's hot-key reports.
    mode: Literal["prewarmed", "cold"] = "prewarmed"
    cache_items: int = Field(10_000, ge=0, le=65_536)  # 0 = no cache (forwarding only)
    # Largest cacheable value: the switch's value slot (NetCache on Tofino:
    # 128 B). Keys with larger values are never cached.
    max_value_bytes: int = Field(128, ge=1, le=128)
    hot_threshold: int = Field(128, ge=1, le=65_535)  # count-min reads per epoch to report a key
    cm_width: int = Field(65_536, ge=16, le=1 << 24)  # count-min counters per row (4 rows)
    bf_bits: int = Field(262_144, ge=64, le=1 << 26)  # Bloom filter bits (3 hashes)
    epoch_ms: PosMillis = 100.0   # controller epoch: counters read and reset, sketch cleared
    virtual_nodes: int = Field(16, ge=1, le=MAX_VNODES)
    ring: Ring = "consistent"

    def payload_bytes(self, key_size: int, value_size: int) -> int:
        """40 B header (the key inside it), value padded to 16 B chunks."""
        return 40 + -(-value_size // 16) * 16


def pipeline_params(cfg: RunConfig) -> str:
    """The ``params`` string of the NetCache pipeline (docs/netcache.md)."""
    proto = cfg.protocol
    assert isinstance(proto, NetCacheProtocol)
    knobs = {
        "cache_items": max(1, proto.cache_items),  # the pipeline needs one slot
        "max_value_bytes": proto.max_value_bytes,
        "hot_threshold": proto.hot_threshold,
        "cm_width": proto.cm_width,
        "bf_bits": proto.bf_bits,
    }
    return ";".join(f"{k}={v}" for k, v in knobs.items())


def wire_key(key: bytes) -> bytes:
    """The key as NetCache carries it: its first 16 bytes (docs/netcache.md,
    "Keys": netkv's keys are unique in their first 16 bytes)."""
    return key[:NETCACHE_KEY_LEN]


def key_words(key: bytes) -> tuple[int, int]:
    """(k0, k1): the 16 B key, zero-padded, as two big-endian 64-bit words."""
    k = wire_key(key).ljust(NETCACHE_KEY_LEN, b"\0")
    return int.from_bytes(k[:8], "big"), int.from_bytes(k[8:], "big")


def table_key(key: bytes) -> list[int]:
    """The ``cache`` table's key: (k0, k1, key length). The length is part of
    the match: a key shorter than 16 B and the same bytes zero-padded fill the
    same (k0, k1) (docs/netcache.md "Tables")."""
    return [*key_words(key), len(wire_key(key))]


def row_hash(row: int, key: bytes) -> int:
    """The pipeline's sketch/Bloom row hash: CRC-32 over row, the two seed
    bytes, row * NC_HASH_ROW_MUL mod 256, k0 (BE), k1 (BE) (spec/constants.toml)."""
    k = wire_key(key).ljust(NETCACHE_KEY_LEN, b"\0")
    return zlib.crc32(bytes([row & 0xFF, NC_HASH_SEED0, NC_HASH_SEED1,
                             (row * NC_HASH_ROW_MUL) & 0xFF]) + k)


@dataclass
class CacheKey:
    """A key the controller may cache. ``key`` is the 16 B wire key;
    ``keyhash`` is carried for the simulator's store (not on the wire)."""

    key: bytes
    keyhash: int
    home: int
    value_len: int | None = None  # known size (prewarm), None = unknown


@dataclass
class Item:
    ck: CacheKey
    idx: int
    filled: bool = False          # the slot was filled (prewarm, fetch or write refresh)
    fetch_req: int | None = None  # req_id of the outstanding fetch
    fetch_epoch: int = 0
    fetches: int = 0
    hits: int = 0                 # cache_hits of the last epoch
    born: int = 0                 # epoch of insertion


@dataclass
class NetCacheStats:
    prewarmed: int = 0
    inserts: int = 0
    evictions: int = 0
    fetches: int = 0
    fetch_acks_ok: int = 0
    fetch_acks_retry: int = 0
    refilled_by_write: int = 0    # a write's refresh filled the slot before the fetch answer
    reports: int = 0
    too_large: int = 0            # reported/hot keys skipped: value > max_value_bytes
    given_up: int = 0             # keys whose fetch kept failing (evicted, never retried)


#: after a switch restart the cached keys are fetched again a 1/REFILL_PARTS
#: of the cache at a time: at the restart, then one part an epoch
REFILL_PARTS = 10


class NetCacheController(Controller):
    def __init__(self, plane: ControlPlane, proto: NetCacheProtocol, prewarm: list[CacheKey],
                 value_len: Callable[[int], int] | None = None) -> None:
        super().__init__(plane)
        self.proto = proto
        self.capacity = proto.cache_items
        self.max_value = proto.max_value_bytes
        self.value_len = value_len
        self.prewarm = prewarm
        self.items: dict[bytes, Item] = {}            # wire key -> cached item
        self.by_req: dict[int, Item] = {}             # outstanding fetch req_id -> item
        self.free_idx = list(range(self.capacity - 1, -1, -1))
        self.never: set[bytes] = set()                # keys never to cache
        self.next_req = 1
        self.epochs = 0
        self.stats = NetCacheStats()
        self.started = False
        self.refill: list[CacheKey] = []   # after a switch restart: still to insert

    # --- set-up ------------------------------------------------------------------

    def start(self) -> None:
        """Prewarm: install the hottest cacheable keys, valid, before traffic.
        Again whenever the switch is back empty after an outage
        (``SimEpochs.switch_back``, the Mininet target's restart): then
        ``_restarted``. Its writes and fetches go as one batch (``batch``)."""
        with self.plane.switch.batch():
            if self.started:
                self._restarted()
            else:
                self.started = True
                self._prewarm()

    def _prewarm(self) -> None:
        sw = self.plane.switch
        for ck in self.prewarm:
            if not self.free_idx:
                break
            if ck.value_len is None or not self._fits(ck):
                continue
            idx = self.free_idx.pop()
            sw.table_add("cache", table_key(ck.key), [idx])  # a new entry is invalid
            # Before traffic every register is at its initial zero and every
            # server preloads the canonical value (zero bytes of the key's
            # size), so only the length is written; then the slot goes valid.
            sw.reg_write("cache_vlen", idx, ck.value_len)
            sw.reg_write("cache_valid", idx, 1)
            self.items[ck.key] = Item(ck, idx, filled=True)
            self.stats.prewarmed += 1

    def _restarted(self) -> None:
        """The switch came back empty (no cache entry, every register zero):
        forget the slots and outstanding fetches, and insert the keys that
        were cached again as learned inserts, invalid until the fetch fills
        them (a write before the outage may have changed a value since the
        preload, so the prewarm's "valid at once" would serve a stale one)."""
        # in the order they were cached (the prewarm's: hottest first)
        self.refill = [it.ck for it in self.items.values()]
        self.items = {}
        self.by_req = {}
        self.free_idx = list(range(self.capacity - 1, -1, -1))
        self._refill()

    def _refill(self) -> None:
        """The next tenth of the cache of the keys cached before the switch
        restarted, into free slots, fetched: all at once (10,000 fetches at
        4 servers) held requests behind them past a 2 ms timeout."""
        n = max(1, self.capacity // REFILL_PARTS)
        batch, self.refill = self.refill[:n], self.refill[n:]
        for ck in batch:
            if self.free_idx and ck.key not in self.items and ck.key not in self.never:
                self._insert(ck)

    def _fits(self, ck: CacheKey) -> bool:
        size = ck.value_len
        if size is None and self.value_len is not None:
            size = self.value_len(ck.keyhash)
        if size is not None and size > self.max_value:
            self.stats.too_large += 1
            self.never.add(ck.key)
            return False
        return True

    # --- every epoch -------------------------------------------------------------------

    def epoch(self, t_s: float) -> None:
        """One batch (``batch``): on netkv-switch a round trip per read and
        per few hundred writes, fetches and table writes, not one or two per
        key (a refill of 1,000 keys: 4,000 round trips, 1.3-2.9 s)."""
        del t_s
        self.epochs += 1
        with self.plane.switch.batch():
            reports = self._drain_cpu()
            candidates = self._estimate(reports)
            self._read_hits()
            self._retry_fetches()
            if self.refill:
                self._refill()
            self._replace(candidates)
            self.plane.switch.reg_write("sketch_clear", 0, 1)  # clears cm_sketch and bloom

    def _drain_cpu(self) -> dict[bytes, CacheKey]:
        reports: dict[bytes, CacheKey] = {}
        while True:
            batch = self.plane.cpu_messages()
            refused: list[Item] = []
            for _src, msg in batch:
                if msg.proto != Proto.NETCACHE:
                    continue
                if msg.op == NetcacheOp.CACHE_UPDATE_ACK:
                    item = self._ack(msg)
                    if item is not None:
                        refused.append(item)
                elif msg.op == NetcacheOp.READ:
                    self.stats.reports += 1
                    key = wire_key(msg.key)
                    if key not in self.items and key not in self.never:
                        reports[key] = CacheKey(key, msg.keyhash, msg.server_id)
            self._fetches_refused(refused)
            if not batch:
                return reports

    def _ack(self, msg: Msg) -> Item | None:
        """Settle the fetch ``msg`` answers; the item if the switch refused it."""
        item = self.by_req.pop(msg.req_id, None)
        if item is None or item.fetch_req != msg.req_id:
            return None  # the answer to an older fetch, or of an evicted key
        item.fetch_req = None
        if msg.result == Result.OK:
            item.filled = True
            self.stats.fetch_acks_ok += 1
            return None
        self.stats.fetch_acks_retry += 1
        return item

    def _fetches_refused(self, items: Sequence[Item]) -> None:
        """The switch did not fill these slots from our fetches. If a write
        went through meanwhile, its reply refreshes the slot (the fetch is
        moot); otherwise the server or the switch refused the value (absent,
        or larger than the slot): fetch again, up to MAX_FETCHES, then give
        up. Their last writers are read in one request (nothing here writes
        another item's slot)."""
        if not items:
            return
        wcli = self.plane.switch.reg_read_many([("cache_wcli", it.idx) for it in items])
        for item, writer in zip(items, wcli, strict=True):
            self._fetch_refused(item, writer)

    def _fetch_refused(self, item: Item, writer: int) -> None:
        if writer != FETCH_CLIENT:
            item.filled = True
            self.stats.refilled_by_write += 1
            return
        if item.fetches >= MAX_FETCHES:
            self.stats.given_up += 1
            self.never.add(item.ck.key)
            self._evict(item)
            return
        self._fetch(item)

    def _estimate(self, reports: dict[bytes, CacheKey]) -> list[tuple[int, CacheKey]]:
        """Reported keys with their count-min estimate of this epoch's reads."""
        width = self.proto.cm_width
        cells = [("cm_sketch", r * width + row_hash(r, key) % width)
                 for key in reports for r in range(CM_ROWS)]
        counts = self.plane.switch.reg_read_many(cells) if cells else []
        out = []
        for i, ck in enumerate(reports.values()):
            out.append((min(counts[i * CM_ROWS:(i + 1) * CM_ROWS]), ck))
        out.sort(key=lambda e: e[0], reverse=True)
        return out

    def _read_hits(self) -> None:
        """Each cached key's hits this epoch, then zeroed. One range read of
        every slot: a read per key (2,000 control round trips on Mininet)
        made the epoch last ~1 s, and it holds the target's switch lock, so
        a switch outage landed that late (docs/mininet.md)."""
        if not self.items:
            return
        sw = self.plane.switch
        hits = sw.reg_read_range("cache_hits", 0, self.capacity)
        for item in self.items.values():
            item.hits = int(hits[item.idx])
            if item.hits:
                sw.reg_write("cache_hits", item.idx, 0)

    def _retry_fetches(self) -> None:
        """Fetches unanswered for FETCH_TIMEOUT_EPOCHS: their slots' valid
        bits read in one request (a refill sends 1,000 fetches at once, and
        their acks may have been lost together)."""
        late = [(it, it.fetch_req) for it in self.items.values() if it.fetch_req is not None
                and self.epochs - it.fetch_epoch >= FETCH_TIMEOUT_EPOCHS]
        if not late:
            return
        valid = self.plane.switch.reg_read_many([("cache_valid", it.idx) for it, _ in late])
        refused = []
        for (item, req), ok in zip(late, valid, strict=True):
            self.by_req.pop(req, None)
            item.fetch_req = None
            if ok:
                item.filled = True  # the ack was lost (CPU channel full)
            else:
                refused.append(item)
        self._fetches_refused(refused)

    def _replace(self, candidates: list[tuple[int, CacheKey]]) -> None:
        """Free slots first; then a candidate replaces the cached key with the
        fewest hits this epoch if it had more reads (NetCache's rule). Keys
        inserted in this epoch have no full epoch of hits yet and stay."""
        victims = sorted((it for it in self.items.values() if it.born < self.epochs),
                         key=lambda it: it.hits, reverse=True)
        for est, ck in candidates:
            if not self._fits(ck):
                continue
            if not self.free_idx:
                if not victims or victims[-1].hits >= est:
                    break
                self._evict(victims.pop())
            self._insert(ck)

    def _insert(self, ck: CacheKey) -> None:
        sw = self.plane.switch
        idx = self.free_idx.pop()
        sw.reg_write("cache_valid", idx, 0)
        sw.table_add("cache", table_key(ck.key), [idx])  # invalid until filled
        sw.reg_write("cache_hits", idx, 0)
        item = Item(ck, idx, born=self.epochs)
        self.items[ck.key] = item
        self.stats.inserts += 1
        self._fetch(item)

    def _fetch(self, item: Item) -> None:
        req = self.next_req
        self.next_req = self.next_req + 1 if self.next_req < 0xFFFFFFFE else 1
        ck = item.ck
        msg = Msg(proto=Proto.NETCACHE, op=NetcacheOp.CACHE_UPDATE, key=ck.key,
                  keyhash=ck.keyhash, server_id=ck.home, client_id=FETCH_CLIENT, req_id=req,
                  nkeys=1)
        item.fetch_req = req
        item.fetch_epoch = self.epochs
        item.fetches += 1
        self.by_req[req] = item
        self.stats.fetches += 1
        self.plane.packet_out(msg, ck.home)

    def _evict(self, item: Item) -> None:
        sw = self.plane.switch
        sw.table_delete("cache", table_key(item.ck.key))  # first: stops matching
        sw.reg_write("cache_valid", item.idx, 0)
        if item.fetch_req is not None:
            self.by_req.pop(item.fetch_req, None)
        del self.items[item.ck.key]
        self.free_idx.append(item.idx)
        self.stats.evictions += 1

    # --- introspection (tests, reports) ------------------------------------------------

    def cached_keys(self) -> list[CacheKey]:
        return [it.ck for it in self.items.values()]


# --- on the simulator ---------------------------------------------------------------------


def value_size_oracle(workload: "Workload") -> Callable[[int], int]:
    """keyhash -> the key's value size (a function of the keyhash alone)."""
    import numpy as np
    info = workload.rank_info()
    sizes = np.unique(info["value_len"])
    if len(sizes) == 1:
        only = int(sizes[0])
        return lambda keyhash: only
    order = np.argsort(info["keyhash"], kind="stable")
    hashes = info["keyhash"][order]
    lens = info["value_len"][order]

    def lookup(keyhash: int) -> int:
        if not 0 <= keyhash <= 0xFFFFFFFF:
            return 0
        # a uint32 needle: a Python int made numpy cast all 10 M hashes per call
        i = int(hashes.searchsorted(np.uint32(keyhash)))
        if i < len(hashes) and int(hashes[i]) == keyhash:
            return int(lens[i])
        return 0
    return lookup


def hottest_cacheable(workload: "Workload", ffi: object, lib: object, count: int,
                      max_value: int) -> list[CacheKey]:
    """The ``count`` most popular keys whose value fits ``max_value`` (the
    workload's rank table, as Pegasus' prewarm uses it)."""
    info = workload.rank_info()
    fit = info[info["value_len"] <= max_value][:count]
    size = workload.key_size
    buf = ffi.new("uint8_t[]", size)  # type: ignore[attr-defined]
    keys = []
    for rec in fit:
        lib.nk_key_bytes(int(rec["key"]), size, buf)  # type: ignore[attr-defined]
        key = wire_key(bytes(ffi.buffer(buf, size)))  # type: ignore[attr-defined]
        keys.append(CacheKey(key, int(rec["keyhash"]), int(rec["home"]), int(rec["value_len"])))
    return keys


def initial_cache(proto: NetCacheProtocol,
                  wl: "Workload") -> tuple[list[CacheKey], Callable[[int], int]]:
    """(keys to cache before traffic, keyhash -> value size) for a workload:
    the cache_items hottest cacheable keys in prewarmed mode, none in cold."""
    prewarm = (hottest_cacheable(wl, wl.ffi, wl.lib, proto.cache_items, proto.max_value_bytes)
               if proto.mode == "prewarmed" else [])
    return prewarm, value_size_oracle(wl)


def sim_controller_factory(cfg: RunConfig):  # type: ignore[no-untyped-def]
    from netkv.sim.control import SimControlPlane, SimEpochs

    proto = cfg.protocol
    assert isinstance(proto, NetCacheProtocol)
    memo: list[tuple["Workload", list[CacheKey], Callable[[int], int]]] = []

    def factory(engine: "SimEngine") -> "SimEpochs":
        plane = SimControlPlane(engine)
        wl = engine.workload
        if not memo or memo[0][0] is not wl:  # the workload is shared by every load point
            memo[:] = [(wl, *initial_cache(proto, wl))]
        _wl, prewarm, sizes = memo[0]
        controller = NetCacheController(plane, proto, prewarm, sizes)
        controller.start()
        factory.last = controller  # type: ignore[attr-defined]
        return SimEpochs(controller)

    return factory


def mininet_controller_factory(cfg: RunConfig):  # type: ignore[no-untyped-def]
    """Real racks (target=mininet): ``factory(plane) -> NetCacheController``
    over the rack's control plane, with the keys of the same workload the
    clients draw from (the target calls ``start()``)."""
    proto = cfg.protocol
    assert isinstance(proto, NetCacheProtocol)

    def factory(plane: ControlPlane) -> NetCacheController:
        from netkv.sim.engine import Workload

        with Workload.from_config(cfg) as wl:
            prewarm, sizes = initial_cache(proto, wl)
        return NetCacheController(plane, proto, prewarm, sizes)

    return factory


# --- on BMv2 (p4src/netcache/netcache.p4) -------------------------------------------------


def p4_defines(params: Params) -> dict[str, int]:
    maxv = param_int(params, "max_value_bytes", 128)
    if maxv % 16 or not 16 <= maxv <= 128:
        raise ValueError(
            f"netcache max_value_bytes {maxv}: the P4 program stores 16 B slices, "
            "so on BMv2 it must be a multiple of 16 in 16..128")
    return {
        "NC_CACHE_ITEMS": param_int(params, "cache_items", 10000),
        "NC_MAX_VALUE": maxv,
        "NC_HOT_THRESHOLD": param_int(params, "hot_threshold", 128),
        "NC_CM_WIDTH": param_int(params, "cm_width", 65536),
        "NC_BF_BITS": param_int(params, "bf_bits", 262144),
    }


class NetCacheP4(P4Semantics):
    """What netcache.c does on a control write that the P4 program leaves to
    the control plane: ``sketch_clear`` is an action, not a register, and a
    ``cache`` entry's slot is invalidated around table writes."""

    special_registers = frozenset({"sketch_clear"})

    def __init__(self) -> None:
        self.installed: dict[tuple[int, ...], int] = {}  # key -> slot installed by us

    def reg_write(self, regs: RegisterCells, name: str, index: int, value: int) -> None:
        # netcache.c: writing non-zero clears the sketch and the Bloom
        # filter; the register itself stays 0
        regs.resolve(name, int(index))
        if value:
            regs.reset(["cm_sketch", "bloom"])

    def before_table_add(self, regs: RegisterCells, table: str, key: Sequence[int],
                         args: Sequence[int]) -> None:
        if table != "cache":
            return
        # netcache.c table_add: the slot starts invalid; a new entry also
        # forgets the slot's last writer. Written before the entry exists, so
        # no packet sees the entry with stale registers.
        idx = int(args[0])
        cells = [("cache_valid", idx, 0)]
        if tuple(key) not in self.installed:
            cells += [("cache_wcli", idx, 0xFFFF), ("cache_wreq", idx, 0xFFFFFFFF)]
        regs.write(cells)
        self.installed[tuple(int(k) for k in key)] = idx

    def after_table_delete(self, regs: RegisterCells, table: str, key: Sequence[int]) -> None:
        if table != "cache":
            return
        # netcache.c table_del: the slot becomes invalid (after the entry is
        # gone). Entries this driver did not install are not known.
        idx = self.installed.pop(tuple(int(k) for k in key), None)
        if idx is not None:
            regs.write([("cache_valid", idx, 0)])


PLUGIN = ProtocolPlugin(
    name="netcache",
    summary="NetCache switch cache (baseline)",
    targets=("sim", "mininet", "testbed"),
    config=NetCacheProtocol,
    wire=Proto.NETCACHE,
    udp_port=NETCACHE_PORT,
    pipeline_params=pipeline_params,
    sim_controller=sim_controller_factory,
    rack_controller=mininet_controller_factory,
    p4=P4Program("netcache/netcache.p4", defines=p4_defines, semantics=NetCacheP4),
    refusals=REFUSALS,
)


if TYPE_CHECKING:
    from netkv.config.schema import RunConfig
    from netkv.sim.engine import SimEngine, Workload
