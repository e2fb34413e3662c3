"""KVSwitch's controller (one class for every target) and its plug-in.

The data plane (hostapps/src/pipeline/kvswitch.c) redirects reads of hot
keys round-robin over their valid replicas, invalidates and multicasts hot
writes, counts hot keys (HotkeyCount), tracks cold keys becoming hot
(HashPipe) and counts the load sent to each server (Loadcount). This
controller is the paper's switch CPU (digest §4), every period:

1. read HotkeyCount, HashPipe (duplicates summed) and Loadcount, then
   ``period_reset``;
2. predict L̂_x = α·L'_x + (1−α)·L_x for every key seen in this or the last
   period and keep the K largest;
3. adapt T (a fraction of the period's total load, so it survives rate
   changes): T ← γ·T while max/mean − 1 of the server loads exceeds ε (the
   optional raise rule of §8.8, T ← T/γ after 3 periods below ε/2, is off
   by default);
4. r_x = min(⌈L̂_x / T⌉, M) copies for L̂_x > T, on the ring from the
   owner with step ⌊M / r_x⌋ (ordinal 1 = owner); with ``install_below_t``
   the other predicted-hot keys are installed with r = 1 (exact counts,
   the owner only);
5. install new or changed keys (Valid = owner bit, RoundRobin = 1, Ver =
   install version, the (owner, r) multicast group, ServermapTable, HotkeyTable
   last, then REPL_CMD to the owner; not for a key installed with r = 1,
   whose owner need not know) and remove keys no longer hot (HotkeyTable
   first; REPL_EVICT to the owner at once, versioned and repeated, unless an
   r = 1 key's owner was never told and Ver shows no stamped write; to the
   replicas one period later).

``mode: prewarmed`` (the simulator's default, as for Pegasus and NetCache)
runs steps 2-5 once before traffic on the workload's exact popularity (the
fluid model of digest §8.8), so a short run measures the steady state;
``cold`` starts empty and learns from traffic, as the paper's controller.

``placement: all`` is the paper's Fig. 9a baseline (Alibaba Tair's hot
zone): the same K predicted-hot keys, each replicated to all M servers, no
threshold T.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from netkv import retries
from netkv.config.base import MAX_VNODES, Pos, ProtocolBase, Ring
from netkv.constants import KVS_M, KVS_VER_SHIFT, kvs_mcast_group
from netkv.loadstats import imbalance_factor
from netkv.protocols.kvswitch_plan import copies, imbalance, placement, plan_threshold
from netkv.protocols.base import ControlPlane, Controller
from netkv.protocols.plugin import (
    P4Program,
    P4Semantics,
    Params,
    ProtocolPlugin,
    RegisterCells,
    param_int,
)
from netkv.wire.codec import KVSWITCH_KEY_LEN, KVSWITCH_PORT, KvswitchOp, Msg, Proto

VER_SHIFT = KVS_VER_SHIFT  # install version of period p: (p + 1) << VER_SHIFT
OWNER_EVICT_REPEATS = 2
MAX_KEYS = 65_535

# what the switch refuses at the trust boundary (docs/security.md): reason ->
# (register, index) of kvswitch.c's stats
REFUSALS = {"host_server_op": ("stats", 8), "forged_fields": ("stats", 10)}


class KVSwitchProtocol(ProtocolBase):
    """KVSwitch (Electronics 8(9) 2019; docs/kvswitch.md)."""

    name: Literal["kvswitch"]
    max_servers: int = Field(KVS_M, ge=1, le=KVS_M)   # packed Valid word: M <= 32
    mode: Literal["prewarmed", "cold"] = "prewarmed"
    hot_keys: int = Field(10_000, ge=1, le=MAX_KEYS)      # K
    hashpipe_stages: int = Field(4, ge=1, le=8)            # d (width K / d)
    alpha_pred: float = Field(0.5, ge=0.0, lt=1.0)         # α, weight of the previous period
    gamma: float = Field(0.8, gt=0.0, lt=1.0)              # γ, T attenuation
    epsilon: float = Field(0.05, gt=0.0)                   # ε, bound on max/mean − 1
    t0: float | None = Field(None, gt=0.0)   # T0 as a fraction of the period's load; None = 1/M
    raise_t: bool = False                    # §8.8: T ← T/γ after 3 periods below ε/2
    period_ms: Pos = 10.0                    # statistics period (simulated time on target=sim)
    strict: bool = True                      # per-key versions (digest §5); false = the paper
    # at-most-once writes at the owner (resent writes answered from a table,
    # never applied twice); None = auto: on when clients resend (netkv/retries.py)
    amo: bool | None = None
    amo_window: int = Field(4096, ge=1, le=1 << 16)   # SEQs remembered per client
    min_period_queries: int = Field(100_000, ge=1)  # periods with fewer are not planned on (§8.13)
    virtual_nodes: int = Field(16, ge=1, le=MAX_VNODES)
    ring: Ring = "equal_ranges"  # the paper: hash mod M (digest §5)
    # selective: r = min(⌈L̂/T⌉, M) copies (the paper's KVSwitch); all: every
    # predicted-hot key on all M servers (Fig. 9a's replicate-to-all baseline)
    placement: Literal["selective", "all"] = "selective"
    # the K predicted-hot keys with L̂ <= T enter HotkeyTable too, with r = 1
    # (counted exactly, read from the owner only, no replica); false: they
    # stay cold, counted by HashPipe (docs/kvswitch.md "Keys below T")
    install_below_t: bool = False

    @property
    def epoch_ms(self) -> float:
        """The sim target's controller period."""
        return self.period_ms


def pipeline_params(cfg: "RunConfig") -> str:
    proto = cfg.protocol
    assert isinstance(proto, KVSwitchProtocol)
    amo = proto.amo if proto.amo is not None else retries.will_retry(cfg)
    return (f"hot_keys={proto.hot_keys};hashpipe_stages={proto.hashpipe_stages};"
            f"strict={int(proto.strict)};amo={int(amo)};amo_window={proto.amo_window}")


def wire_key(key: bytes) -> bytes:
    """The 16 B KEY the client sends (hostapps/src/host/kvswitch.c)."""
    if len(key) >= KVSWITCH_KEY_LEN:
        return key[:KVSWITCH_KEY_LEN]
    return key.rjust(KVSWITCH_KEY_LEN, b"\0")


def key_words(key: bytes) -> tuple[int, int]:
    return int.from_bytes(key[:8], "big"), int.from_bytes(key[8:16], "big")


def words_key(k0: int, k1: int) -> bytes:
    return k0.to_bytes(8, "big") + k1.to_bytes(8, "big")


@dataclass
class KeyInfo:
    keyhash: int
    owner: int


@dataclass
class Hot:
    key: bytes
    info: KeyInfo
    slot: int
    servers: list[int]
    # the owner was told (REPL_CMD or ``own``) during this install: false
    # only for a key installed with r = 1 and never since with r > 1
    told: bool = True
    ver0: int = 0   # the install version written to Ver[slot]


@dataclass
class KVSwitchStats:
    periods: int = 0
    installs: int = 0
    evictions: int = 0
    unknown_keys: int = 0   # predicted hot but no owner known (not installed)
    t_history: list[float] = field(default_factory=list)
    imbalance_history: list[float] = field(default_factory=list)
    installed_history: list[int] = field(default_factory=list)
    loads: list[list[int]] = field(default_factory=list)  # Loadcount per period
    # Fig. 8, per period with a prediction (where the true popularity is known):
    # |predicted top-K ∩ true top-K| / K, and the query shares of the two sets
    accuracy: list[float] = field(default_factory=list)
    predicted_share: list[float] = field(default_factory=list)
    true_share: list[float] = field(default_factory=list)


#: per-period λ at or below which a learning controller counts as settled
#: (Fig. 7a's bound on KVSwitch's λ, experiments/kvswitch/fig7.yaml)
SETTLED_LAMBDA = 0.03


def settling(loads: np.ndarray, bound: float = SETTLED_LAMBDA) -> tuple[float, float]:
    """From Loadcount per period (rows; idle periods left out): λ of the
    second half of the periods summed (the steady state of a controller
    learning from traffic), and the first period (1-based) from which every
    period's λ stays <= ``bound`` (NaN if the last one is above it)."""
    rows = [r for r in loads if r.sum() > 0]
    if not rows:
        return math.nan, math.nan
    lams = [imbalance_factor(r) for r in rows]
    settled = math.nan
    for i in range(len(lams), 0, -1):
        if lams[i - 1] > bound:
            break
        settled = float(i)
    half = sum(rows[len(rows) // 2:])
    return imbalance_factor(half), settled


def top_predicted(pred: dict[bytes, float], k: int) -> list[tuple[bytes, float]]:
    """The ``k`` keys of highest predicted load, ties broken by key bytes: the
    dict's order comes from a set of bytes, which PYTHONHASHSEED reorders per
    process, so a load-only sort made one seed's run differ between processes."""
    return sorted(pred.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


class KVSwitchController(Controller):
    def __init__(self, plane: ControlPlane, proto: KVSwitchProtocol,
                 keymap: Callable[[bytes], KeyInfo | None],
                 prewarm: list[tuple[bytes, float]] | None = None,
                 popularity: list[tuple[bytes, float]] | None = None) -> None:
        super().__init__(plane)
        # the workload's popularity (most popular first), where the target
        # knows it: only for judging predictions (Fig. 8), never for deciding
        self.truth = dict(popularity or [])
        self.true_top = {k for k, _ in (popularity or [])[:proto.hot_keys]}
        self.proto = proto
        self.m = plane.n_servers
        self.keymap = keymap
        self.prewarm = prewarm
        self.k = proto.hot_keys
        # HashPipe's d x ⌈K/d⌉ cells (kvswitch.c's default width)
        self.hp_cells = proto.hashpipe_stages * math.ceil(self.k / proto.hashpipe_stages)
        self.t = proto.t0 if proto.t0 is not None else 1.0 / self.m
        self.prev: dict[bytes, float] = {}
        self.hot: dict[bytes, Hot] = {}
        self.free = list(range(self.k - 1, -1, -1))
        self.pending_evict: list[tuple[bytes, KeyInfo, list[int]]] = []
        # keys removed this period, their slots held till the next epoch
        # (_free_held), with the Ver an r = 1 key's owner was left at (None:
        # evicted)
        self.held: list[tuple[Hot, int | None]] = []
        # owners told a key went cold, again for OWNER_EVICT_REPEATS periods
        # (a lost REPL_EVICT would leave the owner refusing unstamped writes)
        self.owner_evict: list[tuple[bytes, KeyInfo, int, int]] = []
        self.calm = 0
        self.period = 0
        self.stats = KVSwitchStats()
        self.last_prediction: list[bytes] = []
        self.groups: set[int] = set()
        self.started = False

    # -- life cycle --------------------------------------------------------------

    def start(self) -> None:
        """Before traffic, and again whenever the switch is back empty after
        an outage (``SimEpochs.switch_back``, the Mininet target's restart)."""
        import numpy as np
        restarted = self.started
        if restarted:
            self._restarted()
        self.started = True
        if not self.prewarm:
            return
        keys = [k for k, _ in self.prewarm]
        infos = [self.keymap(k) for k in keys]
        shares = np.array([s for _, s in self.prewarm])
        known = [i for i, info in enumerate(infos) if info is not None]
        owners = np.array([infos[i].owner for i in known])  # type: ignore[union-attr]
        sh = shares[known]
        # after a restart by REPL_CMD, as a learned install: a replica may
        # have missed the last write before the outage, so no copy is valid
        # before the owner's push
        prewarmed = not restarted
        if self.proto.placement == "all":
            self._apply({keys[i]: self.m for i in known}, prewarmed=prewarmed)
            self.prev = {k: float(s) for k, s in self.prewarm}
            return
        rest = np.full(self.m, (1.0 - sh.sum()) / self.m)
        self.t = plan_threshold(sh, owners, self.m, self.t, self.proto.epsilon,
                                self.proto.gamma, rest)
        want = {keys[i]: copies(float(shares[i]), self.t, self.m) for i in known}
        self._apply(self._selected(want.items()), prewarmed=prewarmed)
        self.prev = {k: float(s) for k, s in self.prewarm}
        self.stats.t_history.append(self.t)

    def _restarted(self) -> None:
        """The switch came back empty: forget every install (tables, slots,
        multicast groups), and make the servers agree with an empty switch.
        The owners still hold hot = 1 from REPL_CMD (or ``own``) and would
        answer ERROR to every unstamped write of those keys, which the empty
        switch no longer stamps; so each owner gets REPL_EVICT (repeated, as
        for any eviction) at a version above all the old switch stamped. Not
        the replicas: the switch reads none, a later install pushes over
        them, and one that never heard of the key would take the eviction as
        its owner and raise its own (maybe older) value to the owner's
        version. Installs after this (``start``'s prewarm, or the next
        periods' learning) use versions above the evictions'."""
        self.period += 1   # above every version stamped before the outage
        ver = self._ver()
        # and the removed r = 1 keys not evicted: a late stamp is not
        # readable any more (Ver is gone)
        unsure = [(h.key, h) for h, v in self.held if v is not None]
        for key, h in [*self.hot.items(), *unsure]:
            self.owner_evict.append((key, h.info, ver, OWNER_EVICT_REPEATS))
            self._evict_msg(key, h.info, h.info.owner, ver)
        self.hot = {}
        self.held = []
        self.free = list(range(self.k - 1, -1, -1))
        self.pending_evict = []
        self.groups = set()
        self.period += 1   # installs: above the evictions

    def epoch(self, t_s: float) -> None:
        import numpy as np
        del t_s
        sw = self.plane.switch
        self._send_evictions()
        self._free_held()   # after: its evictions go once now, repeated from the next
        loads = np.array(sw.reg_read_range("Loadcount", 0, self.m), dtype=np.float64)
        total = float(loads.sum())
        # a period too short to plan on discards its key counts: reading
        # them (K counters, 3 x K HashPipe cells, a dict of their keys) would
        # be most of the controller's time, for nothing
        plan = total >= self.proto.min_period_queries
        cur: dict[bytes, float] = {}
        if plan and self.hot:
            counts = sw.reg_read_range("HotkeyCount", 0, self.k)
            for key, h in self.hot.items():
                cur[key] = float(counts[h.slot])
        n = self.hp_cells
        cnt = sw.reg_read_range("HashPipeCount", 0, n) if plan else []
        nz = [i for i, c in enumerate(cnt) if c]
        if nz:
            hi = sw.reg_read_range("HashPipeKeyHi", 0, n)
            lo = sw.reg_read_range("HashPipeKeyLo", 0, n)
            for i in nz:
                key = words_key(hi[i], lo[i])
                cur[key] = cur.get(key, 0.0) + cnt[i]
        sw.reg_write("period_reset", 0, 1)
        self.period += 1
        self.stats.periods += 1
        self.stats.loads.append([int(x) for x in loads])
        if not plan:
            return  # too few queries to predict from (digest §8.13): keep the tables
        a = self.proto.alpha_pred
        pred = {k: a * self.prev.get(k, 0.0) + (1 - a) * cur.get(k, 0.0)
                for k in set(cur) | set(self.prev)}
        self.prev = cur
        top = top_predicted(pred, self.k)
        self.last_prediction = [k for k, _ in top]
        self._judge_prediction()
        imb = imbalance(loads)
        self.stats.imbalance_history.append(imb)
        if self.proto.placement == "all":
            # replicate-to-all: no threshold, every predicted-hot key seen
            # this period or the last on all M servers
            self._apply({k: self.m for k, v in top if v > 0})
            return
        if imb > self.proto.epsilon:
            self.t *= self.proto.gamma
            self.calm = 0
        elif self.proto.raise_t and imb < self.proto.epsilon / 2:
            self.calm += 1
            if self.calm >= 3:
                self.t = min(self.t / self.proto.gamma, 1.0)
                self.calm = 0
        self.stats.t_history.append(self.t)
        t_abs = self.t * total
        self._apply(self._selected((k, copies(v, t_abs, self.m)) for k, v in top if v > 0))

    def _selected(self, rs: Iterable[tuple[bytes, int]]) -> dict[bytes, int]:
        """The keys to install: those above T (r > 1), and with
        ``install_below_t`` the rest of the predicted-hot keys too, r = 1."""
        low = 1 if self.proto.install_below_t else 2
        return {k: r for k, r in rs if r >= low}

    # -- tables --------------------------------------------------------------------

    def _apply(self, want: dict[bytes, int], prewarmed: bool = False) -> None:
        sw = self.plane.switch
        gone = [k for k in self.hot if k not in want]
        for key in gone:
            h = self.hot[key]
            sw.table_delete("HotkeyTable", list(key_words(key)))
            for o in range(1, len(h.servers) + 1):
                sw.table_delete("ServermapTable", [h.slot, o])
        # Ver after the deletes: an r = 1 key whose owner was never told is
        # hot there iff a write was stamped (Ver moved)
        vers = self._untold_vers([self.hot[k] for k in gone])
        # On a P4 switch (``atomic_control`` false) the HotkeyTable match and
        # the Ver write are separate steps: a write that matched just before
        # the delete stamps Ver just after it. So every slot is held a
        # period (``held``): reused at once, such a stamp would land one
        # above the new install's Ver, this period's eviction version, and
        # the owner would take the key hot above every REPL_EVICT; and an
        # r = 1 key not evicted has its Ver read again then.
        hold = not sw.atomic_control
        for key in gone:
            h = self.hot.pop(key)
            self.stats.evictions += 1
            evict = h.told or vers[h.slot] != h.ver0
            if evict:
                self._evict_owner(key, h)
            if hold:
                self.held.append((h, None if evict else h.ver0))
            else:
                self.free.append(h.slot)
        for key, r in want.items():
            old = self.hot.get(key)
            info = old.info if old else self.keymap(key)
            if info is None:
                self.stats.unknown_keys += 1
                continue
            servers = placement(info.owner, r, self.m)
            if old and old.servers == servers:
                continue
            if not old and not self.free:
                continue
            slot = old.slot if old else self.free.pop()
            self._install(key, info, slot, servers, old, prewarmed)
        self.stats.installed_history.append(len(self.hot))

    def _install(self, key: bytes, info: KeyInfo, slot: int, servers: list[int],
                 old: Hot | None, prewarmed: bool = False) -> None:
        sw = self.plane.switch
        ver = self._ver()
        # prewarmed: every server already holds every key (the simulator's
        # preload), so the copies are valid at once and nothing is pushed
        sw.reg_write("Valid", slot, sum(1 << s for s in servers) if prewarmed else 1 << info.owner)
        sw.reg_write("RoundRobin", slot, 1)
        sw.reg_write("Ver", slot, ver)
        group = kvs_mcast_group(info.owner, len(servers))
        # one group per (owner, r), the placement's only inputs; none for r = 1:
        # its writes go to the owner unicast (kvswitch.c hot_write)
        if len(servers) > 1 and group not in self.groups:
            sw.mcast_set(group, servers)
            self.groups.add(group)
        if old:
            for o in range(len(servers) + 1, len(old.servers) + 1):
                sw.table_delete("ServermapTable", [slot, o])
            dropped = [s for s in old.servers if s not in servers]
            if dropped:
                self.pending_evict.append((key, info, dropped))
        for o, srv in enumerate(servers, start=1):
            sw.table_add("ServermapTable", [slot, o], [srv])
        sw.table_add("HotkeyTable", list(key_words(key)), [len(servers), slot, info.owner])
        # r = 1 (install_below_t) and the owner not told before: no replica
        # to order its writes against, so it need not know (a stamped write
        # tells it; the eviction then reads Ver to see whether one came)
        told = len(servers) > 1 or (old is not None and old.told)
        self.hot[key] = Hot(key, info, slot, servers, told, ver)
        self.stats.installs += 1
        if not told:
            return
        if prewarmed:
            reply = self.plane.server_ctl(info.owner, f"own {key.hex()}")
            if not reply.startswith("ok"):
                raise RuntimeError(f"server {info.owner} refused own: {reply}")
            return
        payload = bytes([len(servers) - 1, *servers[1:]])
        bitmap = sum(1 << s for s in servers[1:])
        self.plane.packet_out(Msg(proto=Proto.KVSWITCH, op=KvswitchOp.REPL_CMD, key=key,
                                  keyhash=info.keyhash, ver=ver, bitmap=bitmap, value=payload,
                                  server_id=info.owner), info.owner)

    def _evict_owner(self, key: bytes, h: Hot) -> None:
        self.pending_evict.append((key, h.info, h.servers[1:]))
        self.owner_evict.append((key, h.info, self._ver(), OWNER_EVICT_REPEATS))
        self._evict_msg(key, h.info, h.info.owner, self._ver())

    def _free_held(self) -> None:
        """The slots of the keys removed a period ago free again; an r = 1
        key whose owner was not evicted then gets its REPL_EVICT now if a
        write stamped Ver after the first read (BMv2's late stamp)."""
        if not self.held:
            return
        vers = self._untold_vers([h for h, v in self.held if v is not None])
        for h, v in self.held:
            self.free.append(h.slot)
            if v is not None and vers[h.slot] != v:
                self._evict_owner(h.key, h)
        self.held = []

    def _untold_vers(self, gone: list[Hot]) -> dict[int, int]:
        """Ver of the slots of ``gone``'s keys (removed from HotkeyTable)
        whose owner was never told (r = 1): a stamped write made it hot at
        the owner iff Ver moved from the install version (a saturated Ver,
        2³²−1, counts as moved)."""
        slots = [h.slot for h in gone if not h.told]
        if not slots:
            return {}
        sw = self.plane.switch
        if len(slots) > 64:
            cells = sw.reg_read_range("Ver", 0, self.k)
            return {s: -1 if cells[s] == 0xFFFFFFFF else int(cells[s]) for s in slots}
        out = {}
        for s in slots:
            v = int(sw.reg_read("Ver", s))
            out[s] = -1 if v == 0xFFFFFFFF else v
        return out

    def _ver(self) -> int:
        """This period's install (and eviction) version."""
        return min((self.period + 1) << VER_SHIFT, 0xFFFFFFFF)

    def _evict_msg(self, key: bytes, info: KeyInfo, server: int, ver: int) -> None:
        # FLAGS names the owner: a replica whose push was lost (no role
        # there) must not take the eviction as the owner's
        self.plane.packet_out(Msg(proto=Proto.KVSWITCH, op=KvswitchOp.REPL_EVICT, key=key,
                                  keyhash=info.keyhash, ver=ver, result=info.owner + 1), server)

    def _send_evictions(self) -> None:
        # replicas: one period of grace, in-flight redirected reads still find data
        for key, info, servers in self.pending_evict:
            if key in self.hot and set(servers) & set(self.hot[key].servers):
                continue
            for s in servers:
                self._evict_msg(key, info, s, self._ver())
        self.pending_evict = []
        # owners: at once (in _apply), then repeated; versioned, so a late
        # one never cancels a newer install
        again = []
        for key, info, ver, n in self.owner_evict:
            self._evict_msg(key, info, info.owner, ver)
            if n > 1:
                again.append((key, info, ver, n - 1))
        self.owner_evict = again

    def _judge_prediction(self) -> None:
        if not self.true_top:
            return
        k = len(self.true_top)
        self.stats.accuracy.append(len(self.true_top.intersection(self.last_prediction)) / k)
        # fsum: exactly rounded whatever the sets' order, which changes with
        # Python's string hashing from one process to the next
        self.stats.predicted_share.append(math.fsum(self.truth.get(x, 0.0)
                                                    for x in self.last_prediction))
        self.stats.true_share.append(math.fsum(self.truth[x] for x in self.true_top))

    def point_metrics(self) -> dict[str, Any]:
        """Switch-counter statistics of the point (docs/kvswitch.md "Dataset"):
        λ from Loadcount over the run and per period, installed keys,
        replicas per server, T, and (where the popularity is known) the
        prediction's accuracy and query shares averaged over the periods."""
        import numpy as np
        loads = np.asarray(self.stats.loads, dtype=np.float64).reshape(-1, self.m)
        out: dict[str, Any] = {
            "lambda_switch": imbalance_factor(loads.sum(axis=0)) if len(loads) else math.nan,
            "lambda_switch_periods": [imbalance_factor(r) for r in loads if r.sum() > 0],
            "installed_keys": len(self.hot),
            "installed_fraction": len(self.hot) / self.k,
            # keys with a replica (r > 1): installed_keys less install_below_t's r = 1
            "replicated_keys": sum(len(h.servers) > 1 for h in self.hot.values()),
            "replicas_per_server": self.replicas_per_server(),
            "replicas_fraction": self.replicas_per_server() / self.k,
            # replicate-to-all has no threshold
            "threshold_t": self.t if self.proto.placement == "selective" else math.nan,
            "periods": self.stats.periods,
        }
        out["lambda_switch_settled"], out["periods_to_settle"] = settling(loads)
        if self.stats.accuracy:
            out["prediction_accuracy"] = float(np.mean(self.stats.accuracy))
            out["predicted_share"] = float(np.mean(self.stats.predicted_share))
            out["true_share"] = float(np.mean(self.stats.true_share))
        return out

    def replicas_per_server(self) -> float:
        """Average replicas (not counting owners) a server holds."""
        return sum(len(h.servers) - 1 for h in self.hot.values()) / self.m


# --- on the simulator ---------------------------------------------------------------------


def sim_keymap(workload: "Workload", ffi: object, lib: object,
               ranks: int) -> tuple[Callable[[bytes], KeyInfo | None], list[tuple[bytes, float]]]:
    """The partition function the switch CPU shares with the clients, for the
    ``ranks`` most popular keys (wire key -> keyhash, owner), and their
    popularity shares (Zipf over the workload's keys)."""
    info = workload.rank_info()[:ranks]
    size = workload.key_size
    buf = ffi.new("uint8_t[]", size)  # type: ignore[attr-defined]
    table: dict[bytes, KeyInfo] = {}
    keys = []
    for rec in info:
        lib.nk_key_bytes(int(rec["key"]), size, buf)  # type: ignore[attr-defined]
        key = wire_key(bytes(ffi.buffer(buf, size)))  # type: ignore[attr-defined]
        table[key] = KeyInfo(int(rec["keyhash"]), int(rec["home"]))
        keys.append(key)
    return table.get, list(zip(keys, _shares(workload, len(keys))))


def keymap_ranks(workload: "Workload", proto: KVSwitchProtocol) -> int:
    """How many of the most popular keys the switch CPU knows the owner of:
    every key a period may see hot (all of a small key space)."""
    return max(4 * proto.hot_keys, min(workload.n_keys, 100_000))


def _shares(workload: "Workload", n: int) -> list[float]:
    import numpy as np
    alpha = workload.alpha if workload.kind == "zipf" else 0.0
    r = np.arange(1, workload.n_keys + 1, dtype=np.float64)
    p = r ** -alpha
    p /= p.sum()
    return [float(x) for x in p[:n]]


def leaf_prewarm(shares: list[tuple[bytes, float]], owner: "np.ndarray", racks: int,
                 per_rack: int, proto: KVSwitchProtocol) -> list[list[tuple[bytes, float]]]:
    """Per rack, the popularity its leaf sees after the spine's prewarmed
    plan (kvswitch_racks.after_spine): the K keys bringing it the most load,
    as shares of its load, most popular first. ``owner``: each key's
    server over all racks."""
    import numpy as np

    from netkv.protocols.kvswitch_racks import after_spine
    sh = np.array([s for _, s in shares])
    _rs, reach = after_spine(sh, owner, racks, per_rack, proto.hot_keys, proto.epsilon,
                             proto.gamma)
    cold = (1.0 - float(sh.sum())) / (racks * per_rack)
    out = []
    for keys, load in reach:
        total = per_rack * cold + float(load.sum())
        top = np.argsort(-load, kind="stable")[:proto.hot_keys]
        out.append([(shares[int(keys[i])][0], float(load[i] / total)) for i in top])
    return out


def _viewed_keymap(keymap: Callable[[bytes], KeyInfo | None],
                   home_of: Callable[[int], int]) -> Callable[[bytes], KeyInfo | None]:
    """The keymap with each owner as one switch of several sees it."""
    def get(key: bytes) -> KeyInfo | None:
        info = keymap(key)
        return None if info is None else KeyInfo(info.keyhash, home_of(info.owner))
    return get


def sim_controller_factory(cfg: "RunConfig"):  # type: ignore[no-untyped-def]
    """``factory(engine)``: one rack's controller. With racks the simulator
    calls it once per switch with that switch's view (netkv.sim.racks): the
    spine plans over racks on the workload's popularity, a leaf on what
    reaches it after the spine's plan (its keys' owners are their index in
    the rack), both prewarmed and held. Read-only: a push names replicas
    by the switch's node ids, and a server reads them as servers, so
    writes, cold mode and re-plans are not modelled across racks."""
    from netkv.sim.control import SimControlPlane, SimEpochs
    from netkv.sim.engine import SimError

    proto = cfg.protocol
    assert isinstance(proto, KVSwitchProtocol)
    if cfg.topology.kind == "racks":
        if cfg.workload.write_ratio > 0 or proto.mode != "prewarmed":
            raise SimError(f"protocol kvswitch with topology.kind=racks: write_ratio = "
                           f"{cfg.workload.write_ratio:g}, protocol.mode = {proto.mode} "
                           "(allowed: 0 and prewarmed: pushes across racks are not modelled)")
        # the plans held: no period is planned on
        proto = proto.model_copy(update={"min_period_queries": 2**62})
    memo: list[tuple[object, Callable[[bytes], KeyInfo | None], list[tuple[bytes, float]]]] = []
    leaves: dict[int, list[list[tuple[bytes, float]]]] = {}

    def factory(engine: "SimEngine") -> "SimEpochs":
        plane = SimControlPlane(engine)
        wl = engine.workload
        base = getattr(wl, "base", wl)  # a switch's view of it (racks): homes over all
        if not memo or memo[0][0] is not base:
            keymap, shares = sim_keymap(base, engine.ffi, engine.lib, keymap_ranks(base, proto))
            memo[:] = [(base, keymap, shares)]
            leaves.clear()
        _wl, keymap, shares = memo[0]
        if base is not wl:
            keymap = _viewed_keymap(keymap, wl.home_of)
        popularity = shares
        if getattr(engine, "role", "rack") == "leaf":
            if id(base) not in leaves:
                owner = base.rank_info()["home"][:len(shares)].astype("int64")
                leaves.clear()
                leaves[id(base)] = leaf_prewarm(shares, owner, engine.racks, engine.per_rack,
                                                proto)
            popularity = leaves[id(base)][engine.rack]
        prewarm = popularity[:proto.hot_keys] if proto.mode == "prewarmed" else None
        controller = KVSwitchController(plane, proto, keymap, prewarm, popularity=popularity)
        controller.start()
        factory.last = controller  # type: ignore[attr-defined]
        return SimEpochs(controller)

    return factory


def mininet_controller_factory(cfg: "RunConfig"):  # type: ignore[no-untyped-def]
    """Real racks (target=mininet): ``factory(plane) -> KVSwitchController``
    over the rack's control plane, with the partition function and popularity
    of the same workload the clients draw from (the target calls ``start()``)."""
    proto = cfg.protocol
    assert isinstance(proto, KVSwitchProtocol)

    def factory(plane: ControlPlane) -> KVSwitchController:
        from netkv.sim.engine import Workload

        with Workload.from_config(cfg) as wl:
            keymap, shares = sim_keymap(wl, wl.ffi, wl.lib, keymap_ranks(wl, proto))
        prewarm = shares[:proto.hot_keys] if proto.mode == "prewarmed" else None
        return KVSwitchController(plane, proto, keymap, prewarm, popularity=shares)

    return factory


# --- on BMv2 (p4src/kvswitch/kvswitch.p4) ---------------------------------------------------

#: what ``period_reset`` clears (kvswitch.c ks_reg_write): the per-period statistics
PERIOD_REGISTERS = ("HashPipeKeyHi", "HashPipeKeyLo", "HashPipeCount", "HotkeyCount", "Loadcount")


def p4_defines(params: Params) -> dict[str, int]:
    """kvswitch.c's params as the P4 program's compile-time constants."""
    k = param_int(params, "hot_keys", 10_000)
    d = param_int(params, "hashpipe_stages", 4)
    if not 1 <= k <= MAX_KEYS or not 1 <= d <= 8:
        raise ValueError(f"kvswitch hot_keys {k} / hashpipe_stages {d}: allowed 1..{MAX_KEYS} / 1..8")
    w = param_int(params, "hashpipe_width", 0) or -(-k // d)
    return {"KVS_HOT_KEYS": k, "KVS_HP_STAGES": d, "KVS_HP_WIDTH": w,
            "KVS_STRICT": param_int(params, "strict", 1) and 1}


class KVSwitchP4(P4Semantics):
    """What kvswitch.c does on a control write that the P4 program leaves to
    the control plane: ``period_reset`` is an action, not a register."""

    special_registers = frozenset({"period_reset"})

    def reg_write(self, regs: RegisterCells, name: str, index: int, value: int) -> None:
        regs.resolve(name, int(index))
        if value:
            regs.reset(list(PERIOD_REGISTERS))


def variant(cfg: "RunConfig") -> str:
    """The baseline this run is (ProtocolPlugin.variant): Fig. 9a's replicate-to-all."""
    p = cfg.protocol
    return "replicate-to-all" if isinstance(p, KVSwitchProtocol) and p.placement == "all" else ""


PLUGIN = ProtocolPlugin(
    name="kvswitch",
    summary="KVSwitch prediction-driven selective replication (Electronics 2019)",
    targets=("sim", "mininet", "testbed"),
    preload="all",  # a hot key's replicas are read anywhere (prewarmed: valid at once)
    config=KVSwitchProtocol,
    wire=Proto.KVSWITCH,
    udp_port=KVSWITCH_PORT,
    pipeline_params=pipeline_params,
    sim_controller=sim_controller_factory,
    rack_controller=mininet_controller_factory,
    p4=P4Program("kvswitch/kvswitch.p4", defines=p4_defines, semantics=KVSwitchP4),
    refusals=REFUSALS,
    variant=variant,
)


if TYPE_CHECKING:
    import numpy as np

    from netkv.config.schema import RunConfig
    from netkv.sim.engine import SimEngine, Workload
