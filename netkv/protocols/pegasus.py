"""Pegasus' controller (one class for every target) and its pipeline knobs.

The data plane (hostapps/src/pipeline/pegasus.c, p4src/pegasus/) keeps the
coherence directory; this controller decides *which* keys it covers, using
only the register and table names of docs/pegasus.md:

- ``prewarmed`` mode (the authors' artifact, Figs. 7-12): the K hottest keys
  are replicated on every server before traffic starts (every server already
  holds every key at version 1), with rset = all servers.
- ``cold`` mode (the full protocol, Fig. 13): keys are learned from the
  switch's samples of unreplicated requests and its per-key counters, added
  with rset = {home}, spread by a virtual write, and removed by draining
  (digest section 9.1-9.2).

Every epoch it also sets each key's write fan-out from its read/write ratio
and, with ``selection=wrr``, rebuilds the weighted round-robin schedule from
the servers' load reports (our choice: multiplicative weights that equalise
load / capacity, expanded into 256 interleaved slots).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from netkv import retries
from netkv.config.base import MAX_VNODES, Pos, PosMillis, ProtocolBase, Ring
from netkv.constants import (
    PEG_FANOUT_DIV_UNIT,
    PEG_N,
    PEG_VER_NEXT_INITIAL,
    PEG_WRR_SLOTS,
    peg_fanout_round,
    peg_mcast_group,
    peg_wrr_len_initial,
    peg_wrr_sched_initial,
)
from netkv.protocols.base import ControlPlane, Controller
from netkv.protocols.plugin import P4Program, Params, ProtocolPlugin, param_int, param_str
from netkv.wire.codec import PEGASUS_PORT, Msg, PegasusOp, Proto

RSET_STRIDE = PEG_N        # rset_list[idx * 32 + i]
WRR_SLOTS = PEG_WRR_SLOTS
SAMPLE_EVERY = 128         # pipeline param `sample`
GC_PERIOD_S = 1.0
ADD_HYSTERESIS = 2.0       # a candidate must be this much hotter than the coldest key
HOTNESS_DECAY = 0.5        # EWMA weight of the newest epoch
# Candidates are seen only through 1-in-SAMPLE_EVERY samples: at 1.4 Mreq/s the
# 64th key (Zipf 1.2) gives ~0.14 samples per 10 ms epoch, and one sample means
# 12.8 k req/s +-100%. So a candidate's rate is averaged over ~10 epochs
# (EWMA weight CAND_DECAY on its sample count), and it may evict a replicated
# key only with MIN_SAMPLES (decayed) samples behind it (+-50%), else the 2x
# ADD_HYSTERESIS margin means nothing (the artifact's dynamic controller also
# called a key hot only after >= 5 samples).
CAND_DECAY = 0.1
MIN_SAMPLES = 4.0
AMO_WINDOW = 4096          # REQIDs remembered per client (host param amo_window)
# After a switch restart ver_next resumes this far above the newest version any
# server stores: a write the old switch stamped that had not reached its server
# when the switch came back still orders before every new one (docs/pegasus.md
# "Switch restart"); 2^32 restarts before the 64-bit counter runs out.
RESTART_VER_GAP = 1 << 32
MAX_SERVERS = 32           # the 32-bit replica bitmap


class PegasusProtocol(ProtocolBase):
    name: Literal["pegasus"]
    max_servers: int = Field(MAX_SERVERS, ge=1, le=MAX_SERVERS)
    mode: Literal["prewarmed", "cold"] = "prewarmed"
    selection: Literal["random", "rr", "wrr", "least_loaded"] = "wrr"
    replicated_keys: int | None = Field(None, ge=0, le=1 << 20)
    epoch_ms: PosMillis = 10.0
    amo: bool | None = None  # None = auto: on when clients resend (netkv/retries.py)
    virtual_nodes: int = Field(16, ge=1, le=MAX_VNODES)
    ring: Ring = "consistent"
    # Write fan-out r = clamp(round(reads / (writes + 1) / fanout_div), 1, n)
    # per key and epoch: proportional to reads per write (the paper gives no
    # formula). 1, not the digest's 4: see docs/pegasus.md "Write fan-out".
    # C and P4 divide integers: the divisor is carried in sixteenths
    # (PEG_FANOUT_DIV_UNIT), so it must be a multiple of 1/16.
    fanout_div: Pos = 1.0
    # Deliberately broken directory (stale replicas join the replica set):
    # only for showing that the linearizability check catches it.
    unsafe_skip_version_check: bool = False

    @model_validator(mode="after")
    def _amo_is_prewarmed_only(self) -> "PegasusProtocol":
        # docs/pegasus.md's AMO mode change (pause the key, copy the client
        # tables with amo_get/amo_put) is not implemented: a key that joins or
        # leaves the directory would lose its at-most-once guarantee
        if self.amo and self.mode == "cold":
            raise ValueError("protocol.amo = true with protocol.mode = cold is not implemented "
                             "yet (the AMO mode change of docs/pegasus.md; allowed: amo with "
                             "mode=prewarmed)")
        return self

    @model_validator(mode="after")
    def _fanout_div_in_sixteenths(self) -> "PegasusProtocol":
        d16 = self.fanout_div * PEG_FANOUT_DIV_UNIT
        if d16 != round(d16) or not 1 <= d16 <= 0xFFFF:
            raise ValueError(
                f"protocol.fanout_div = {self.fanout_div:g} (allowed: a multiple of "
                f"1/{PEG_FANOUT_DIV_UNIT} in 1/{PEG_FANOUT_DIV_UNIT}.."
                f"{0xFFFF / PEG_FANOUT_DIV_UNIT}: the switch divides in sixteenths)")
        return self

    @property
    def fanout_div16(self) -> int:
        """fanout_div in sixteenths, as the C pipeline and the P4 program take it."""
        return round(self.fanout_div * PEG_FANOUT_DIV_UNIT)


def replicated_keys(cfg: RunConfig) -> int:
    """K = n * ceil(log2 n) unless set explicitly."""
    proto = cfg.protocol
    assert isinstance(proto, PegasusProtocol)
    if proto.replicated_keys is not None:
        return proto.replicated_keys
    n = cfg.topology.servers
    return n * max(1, math.ceil(math.log2(n))) if n > 1 else 1
# What the switch refused at the trust boundary, by reason (docs/security.md):
# reason -> (register, index); read after every point into the dataset.
REFUSALS = {
    "forged_ver": ("stats", 14),
    "forged_flags": ("stats", 15),
    "host_server_op": ("stats", 16),
    "ver_exhausted": ("stats", 17),
}


def amo_on(cfg: RunConfig) -> bool:
    """``protocol.amo``, or when unset (auto): on whenever clients resend
    requests (injected loss or duplication), so that a resent write is applied
    at most once and histories stay linearizable; off in cold mode, whose AMO
    mode change is not implemented."""
    proto = cfg.protocol
    assert isinstance(proto, PegasusProtocol)
    if proto.amo is not None:
        return proto.amo
    return proto.mode == "prewarmed" and retries.will_retry(cfg)


def pipeline_params(cfg: RunConfig) -> str:
    """The ``params`` string of the Pegasus pipeline and host logic."""
    proto = cfg.protocol
    assert isinstance(proto, PegasusProtocol)
    k = max(1, replicated_keys(cfg))
    capacity = k if proto.mode == "prewarmed" else 2 * k  # room for keys being drained
    knobs = {
        "max_rkeys": capacity,
        "n_servers": cfg.topology.servers,
        "selection": proto.selection,
        "amo": int(amo_on(cfg)),
        "sample": SAMPLE_EVERY,
        "fanout": "reg",
        "fanout_div16": proto.fanout_div16,
        "ver_next": PEG_VER_NEXT_INITIAL,
    }
    if amo_on(cfg):
        # The client table must remember every REQID a client can still retry:
        # open-loop clients have many requests outstanding (our choice: 4096).
        knobs["amo_window"] = AMO_WINDOW
    if proto.unsafe_skip_version_check:
        knobs["unsafe_skip_version_check"] = 1
    return ";".join(f"{k}={v}" for k, v in knobs.items())


def dead_knobs(cfg: RunConfig) -> set[str]:
    """Config keys with no effect on this run: AMO and the write fan-out act
    only on writes; the selection policy only picks among a replicated
    key's servers (none replicated, or one server: nothing to pick)."""
    proto = cfg.protocol
    assert isinstance(proto, PegasusProtocol)
    dead = set()
    if cfg.workload.write_ratio == 0 and cfg.workload.kind != "trace":
        dead |= {"protocol.amo", "protocol.fanout_div"}
    if replicated_keys(cfg) == 0 or cfg.topology.servers == 1:
        dead.add("protocol.selection")
    return dead


@dataclass
class HotKey:
    key: bytes
    keyhash: int
    home: int


@dataclass
class Entry:
    hot: HotKey
    idx: int
    hotness: float = 0.0
    draining: bool = False
    fanout: int = 1           # the value in the fanout register
    drain_last_write: int = 0
    spread: bool = False      # a virtual write has extended the rset


@dataclass
class Candidate:
    hot: HotKey
    hotness: float = 0.0
    seen: float = field(default=0.0)   # decayed sample count (CAND_DECAY per epoch)


class PegasusController(Controller):
    # its restart's start() raises ver_next above every stored version
    # before any write may be stamped, and needs nothing through the switch
    # (the stores merge over the servers' control sockets)
    restart_closed = True

    def __init__(self, plane: ControlPlane, cfg: RunConfig, prewarm: list[HotKey]) -> None:
        import numpy as np
        super().__init__(plane)
        proto = cfg.protocol
        assert isinstance(proto, PegasusProtocol)
        self.proto = proto
        self.n = plane.n_servers
        self.k = replicated_keys(cfg)
        self.capacity_slots = max(1, self.k) if proto.mode == "prewarmed" else 2 * max(1, self.k)
        self.prewarm = prewarm[: self.k]
        self.entries: dict[int, Entry] = {}          # keyhash -> entry
        self.free_idx = list(range(self.capacity_slots - 1, -1, -1))
        self.candidates: dict[int, Candidate] = {}   # unreplicated keys seen in samples
        self.weights = np.asarray(plane.capacity, dtype=np.float64).copy()
        self.schedule: list[int] | None = None  # the WRR slots installed now
        self.last_t = 0.0
        self.last_gc = 0.0
        self.vwrites_sent = 0
        self.added = 0      # keys added (cold mode)
        self.removed = 0    # keys removed after draining
        self.started = False
        self.ver_next_set = PEG_VER_NEXT_INITIAL  # the switch's ver_next when last set
        self.prewarm_ver = 1  # the version every server holds the prewarmed keys at (or below)
        self.restarts: list[tuple[int, int]] = []  # (newest stored version, ver_next resumed at)

    # --- set-up ------------------------------------------------------------------

    def start(self) -> None:
        """Before traffic, and again whenever the switch is back empty after
        an outage (``SimEpochs.switch_back``, the Mininet target's restart)."""
        if self.started:
            self._restarted()
        self.started = True
        sw = self.plane.switch
        self._install_write_groups()
        if self.proto.selection == "wrr":
            self._write_schedule(self.weights)
        ver = self.prewarm_ver
        for hot in self.prewarm:
            idx = self.free_idx.pop()
            for s in range(self.n):
                self._ctl(s, f"rkey_add {hot.keyhash} {hot.key.hex()} 1")
            sw.reg_write("ver_completed", idx, ver)
            sw.reg_write("ver_last_write", idx, ver)
            for i in range(self.n):
                sw.reg_write("rset_list", idx * RSET_STRIDE + i, i)
            sw.reg_write("rset_size", idx, self.n)
            sw.reg_write("rset_bitmap", idx, (1 << self.n) - 1)
            self._reset_entry_regs(idx)
            sw.table_add("rkeys", [hot.keyhash], [idx])  # last: the entry goes live
            self.entries[hot.keyhash] = Entry(hot, idx, spread=True)

    def _restarted(self) -> None:
        """The switch came back empty (registers at their initial values, no
        table entry, no multicast group), with ``ver_next`` back at its
        initial value while the servers keep the versions the old switch
        stamped. The directory it kept (who holds each replicated key's
        latest write) is gone, so the servers are made to agree first: every
        server gets every key's newest version (out of band, merged through
        server 0), so any server may serve any key again. ``ver_next``
        resumes RESTART_VER_GAP above the newest version stored: new writes
        order after every earlier one. Then everything installed is
        forgotten (entries, slots, the WRR schedule; cold mode: the servers'
        replicated keys too) and ``start`` installs again, the prewarmed keys
        at ``ver_completed`` = the newest version stored (every server holds
        each key at or below it: an older reply leaves the rset alone, a
        write's newer one resets it as always); cold mode learns its keys
        again."""
        plane, sw = self.plane, self.plane.switch
        if not plane.restart_before_traffic:
            # the new switch stamps writes from its initial ver_next until the
            # controller raises it: servers holding newer versions would
            # acknowledge and discard them (docs/pegasus.md)
            raise NotImplementedError(
                "pegasus: a switch restart on this target forwards writes before the "
                "controller raises ver_next above the servers' versions (acknowledged writes "
                "would be discarded); it needs a switch that restarts closed until the "
                "controller is done (target=sim, or target.switch=netkv)")
        try:
            for s in range(1, self.n):
                plane.copy_store(s, 0)
            for s in range(1, self.n):
                plane.copy_store(0, s)
            newest = max(plane.newest_version(s) for s in range(self.n))
        except NotImplementedError as e:
            raise NotImplementedError(
                f"pegasus: a switch restart needs the servers' stores merged and their newest "
                f"version read, which this target cannot do ({e})") from e
        floor = max(newest, self.ver_next_set - 1)
        ver_next = floor + RESTART_VER_GAP
        sw.reg_write("ver_next", 0, ver_next)
        self.ver_next_set = ver_next
        self.prewarm_ver = floor
        self.restarts.append((newest, ver_next))
        if self.proto.mode == "cold":
            for entry in self.entries.values():
                for s in range(self.n):
                    self._ctl(s, f"rkey_del {entry.hot.keyhash}")
        self.entries = {}
        self.free_idx = list(range(self.capacity_slots - 1, -1, -1))
        self.schedule = None

    def _install_write_groups(self) -> None:
        """The multicast groups of write fan-out (docs/pegasus.md "Write
        fan-out"): group ``start * 32 + (r - 1)`` replicates to the ports of
        servers start, start+1, ..., start+r-1 (mod n), for every start < n and
        2 <= r <= n (ids 1..1023; r = 1 is unicast). Server s is behind port s
        on every target (the rack plan); the switch addresses each copy to the
        node behind its port."""
        sw = self.plane.switch
        for start in range(self.n):
            for r in range(2, self.n + 1):
                sw.mcast_set(peg_mcast_group(start, r), [(start + k) % self.n for k in range(r)])

    def _ctl(self, server: int, line: str) -> str:
        reply = self.plane.server_ctl(server, line)
        if not reply.startswith("ok"):
            raise RuntimeError(f"server {server} refused {line.split()[0]}: {reply}")
        return reply

    def _reset_entry_regs(self, idx: int) -> None:
        sw = self.plane.switch
        for name in ("rr_key", "rate", "rd_cnt", "wr_cnt", "draining", "paused"):
            sw.reg_write(name, idx, 0)
        sw.reg_write("fanout", idx, 1)

    # --- every epoch -------------------------------------------------------------------

    def epoch(self, t_s: float) -> None:
        dt = max(t_s - self.last_t, 1e-9)
        self.last_t = t_s
        self._counters(dt)
        if self.proto.selection == "wrr":
            self._update_weights()
        if self.proto.mode == "cold":
            self._learn(dt)
            self._finish_removals()
            self._spread()
            if t_s - self.last_gc >= GC_PERIOD_S:
                self._gc()
                self.last_gc = t_s
        else:
            self.plane.cpu_messages()  # samples are not used in prewarmed mode

    def _counters(self, dt: float) -> None:
        sw = self.plane.switch
        slots = max((entry.idx for entry in self.entries.values()), default=-1) + 1
        # one ranged read per register: a driver may batch it (BMv2: one CLI run)
        rd_cnt = sw.reg_read_range("rd_cnt", 0, slots)
        wr_cnt = sw.reg_read_range("wr_cnt", 0, slots)
        for entry in self.entries.values():
            idx = entry.idx
            rd, wr = rd_cnt[idx], wr_cnt[idx]
            if rd or wr:  # untouched counters need no reset (most keys, most epochs)
                for name in ("rate", "rd_cnt", "wr_cnt"):
                    sw.reg_write(name, idx, 0)
            rate = (rd + wr) / dt
            entry.hotness = (1 - HOTNESS_DECAY) * entry.hotness + HOTNESS_DECAY * rate
            fanout = min(max(fanout_of(rd, wr, self.proto.fanout_div16), 1), self.n)
            if fanout != entry.fanout:
                sw.reg_write("fanout", idx, fanout)
                entry.fanout = fanout

    # --- weighted round robin -------------------------------------------------------------

    def _update_weights(self) -> None:
        import numpy as np
        sw = self.plane.switch
        load = np.array(sw.reg_read_range("srv_load", 0, self.n), dtype=np.float64)
        if load.sum() <= 0:
            return
        util = load / self.plane.capacity
        target = util.mean()
        factor = np.clip(np.sqrt(target / np.maximum(util, 1e-9)), 0.5, 2.0)
        weights = self.weights * factor
        weights = np.maximum(weights / weights.sum(), 1.0 / (4 * WRR_SLOTS))
        self.weights = weights / weights.sum()
        self._write_schedule(self.weights)

    def _write_schedule(self, weights: np.ndarray) -> None:
        """Install the schedule, writing only the slots that changed."""
        sw = self.plane.switch
        schedule = smooth_wrr(weights, WRR_SLOTS)
        for slot, server in enumerate(schedule):
            if self.schedule is None or self.schedule[slot] != server:
                sw.reg_write("wrr_sched", slot, server)
        if self.schedule is None:
            sw.reg_write("wrr_len", 0, WRR_SLOTS)
        self.schedule = schedule

    # --- cold mode: learning, adding, spreading, removing ---------------------------------

    def _learn(self, dt: float) -> None:
        counts: dict[int, int] = {}
        for _src, msg in self.plane.cpu_messages():
            if msg.proto != Proto.PEGASUS or msg.op not in (PegasusOp.READ, PegasusOp.WRITE):
                continue
            if msg.keyhash in self.entries:
                continue
            cand = self.candidates.get(msg.keyhash)
            if cand is None:
                cand = Candidate(HotKey(msg.key, msg.keyhash, msg.server_id))
                self.candidates[msg.keyhash] = cand
            counts[msg.keyhash] = counts.get(msg.keyhash, 0) + 1
        for keyhash, cand in list(self.candidates.items()):
            cand.seen = (1 - CAND_DECAY) * cand.seen + counts.get(keyhash, 0)
            cand.hotness = CAND_DECAY * cand.seen * SAMPLE_EVERY / dt
            if cand.seen < 0.5 and keyhash not in counts:
                del self.candidates[keyhash]
        ranked = sorted(self.candidates.values(), key=lambda c: c.hotness, reverse=True)
        active = [e for e in self.entries.values() if not e.draining]
        for cand in ranked:
            if cand.hotness <= 0:
                break
            if len(active) < self.k and self.free_idx:
                self._add(cand.hot, cand.hotness)
                active.append(self.entries[cand.hot.keyhash])
                continue
            if cand.seen < MIN_SAMPLES:  # ranked by hotness = by seen: none below has more
                break
            coldest = min(active, key=lambda e: e.hotness, default=None)
            if coldest is None or cand.hotness < ADD_HYSTERESIS * max(coldest.hotness, 1.0):
                break
            self._start_removal(coldest)
            active.remove(coldest)
            if self.free_idx:
                self._add(cand.hot, cand.hotness)
                active.append(self.entries[cand.hot.keyhash])

    def _add(self, hot: HotKey, hotness: float) -> None:
        sw = self.plane.switch
        idx = self.free_idx.pop()
        for s in range(self.n):
            self._ctl(s, f"rkey_add {hot.keyhash} {hot.key.hex()}")
        vn = sw.reg_read("ver_next", 0)
        self.ver_next_set = max(self.ver_next_set, vn)
        sw.reg_write("ver_completed", idx, vn - 1)
        sw.reg_write("ver_last_write", idx, vn - 1)
        sw.reg_write("rset_size", idx, 1)
        sw.reg_write("rset_bitmap", idx, 1 << hot.home)
        sw.reg_write("rset_list", idx * RSET_STRIDE, hot.home)
        self._reset_entry_regs(idx)
        sw.table_add("rkeys", [hot.keyhash], [idx])
        self.entries[hot.keyhash] = Entry(hot, idx, hotness=hotness)
        self.candidates.pop(hot.keyhash, None)
        self.added += 1

    def _spread(self) -> None:
        """Virtual writes copy newly added read-mostly keys to every server."""
        sw = self.plane.switch
        everyone = (1 << self.n) - 1
        for entry in self.entries.values():
            if entry.draining or entry.spread:
                continue
            if sw.reg_read("rset_size", entry.idx) >= self.n:
                entry.spread = True
                continue
            self._vwrite(entry, everyone & ~(1 << entry.hot.home))

    def _vwrite(self, entry: Entry, targets: int) -> None:
        hot = entry.hot
        msg = Msg(proto=Proto.PEGASUS, op=PegasusOp.VWRITE, keyhash=hot.keyhash, key=hot.key,
                  server_id=hot.home, bitmap=targets, req_id=self.vwrites_sent)
        self.vwrites_sent += 1
        self.plane.packet_out(msg, hot.home)

    def _start_removal(self, entry: Entry) -> None:
        sw = self.plane.switch
        sw.reg_write("draining", entry.idx, 1)
        entry.draining = True
        entry.drain_last_write = sw.reg_read("ver_last_write", entry.idx)

    def _finish_removals(self) -> None:
        sw = self.plane.switch
        for entry in [e for e in self.entries.values() if e.draining]:
            idx, home = entry.idx, entry.hot.home
            if sw.reg_read("ver_completed", idx) < entry.drain_last_write:
                continue
            if not sw.reg_read("rset_bitmap", idx) >> home & 1:
                self._vwrite(entry, 1 << home)  # make the home hold the latest version
                continue
            sw.table_delete("rkeys", [entry.hot.keyhash])  # first: the entry stops matching
            for name in ("ver_completed", "ver_last_write", "rset_size", "rset_bitmap"):
                sw.reg_write(name, idx, 0)
            self._reset_entry_regs(idx)
            for s in range(self.n):
                self._ctl(s, f"rkey_del {entry.hot.keyhash}")
            del self.entries[entry.hot.keyhash]
            self.free_idx.append(idx)
            self.removed += 1

    def _gc(self) -> None:
        sw = self.plane.switch
        for entry in self.entries.values():
            completed = sw.reg_read("ver_completed", entry.idx)
            for s in range(self.n):
                self._ctl(s, f"rkey_ver {entry.hot.keyhash} {completed}")
        for s in range(self.n):
            self._ctl(s, "gc")


def fanout_of(reads: int, writes: int, fanout_div16: int) -> int:
    """Write fan-out before clamping: reads / (writes + 1) / fanout_div, rounded
    half up in integers, the C pipeline's and the P4 program's formula
    (spec/constants.toml; fanout_div in sixteenths)."""
    return peg_fanout_round(reads, writes, fanout_div16)


def smooth_wrr(weights: np.ndarray, slots: int) -> list[int]:
    """Interleaved weighted round robin (nginx's smooth WRR) over ``slots``."""
    import numpy as np
    w = np.asarray(weights, dtype=np.float64)
    if not math.isfinite(w.sum()) or w.sum() <= 0:
        w = np.ones_like(w)
    share = (w / w.sum()).tolist()
    # plain floats: the loop runs every epoch on Mininet's two shared cores,
    # where numpy's per-call cost made it 0.64 ms (same picks: IEEE adds in
    # the same order, and max() keeps the first of equal maxima as argmax)
    current = [0.0] * len(share)
    order = []
    servers = range(len(share))
    for _ in range(slots):
        for i in servers:
            current[i] += share[i]
        pick = max(servers, key=current.__getitem__)
        current[pick] -= 1.0
        order.append(pick)
    return order


# --- on the simulator ---------------------------------------------------------------------


def hottest_keys(engine: "SimEngine", count: int) -> list[HotKey]:
    """The workload's ``count`` most popular keys (prewarmed mode knows them,
    as the artifact's preloaded hot-key list does)."""
    return workload_hot_keys(engine.workload, count)


def sim_controller_factory(cfg: RunConfig):  # type: ignore[no-untyped-def]
    from netkv.sim.control import SimControlPlane, SimEpochs

    proto = cfg.protocol
    assert isinstance(proto, PegasusProtocol)

    def factory(engine: "SimEngine") -> "SimEpochs":
        plane = SimControlPlane(engine)
        prewarm = hottest_keys(engine, replicated_keys(cfg)) if proto.mode == "prewarmed" else []
        controller = PegasusController(plane, cfg, prewarm)
        controller.start()
        factory.last = controller  # type: ignore[attr-defined]  # for tests and diagnostics
        return SimEpochs(controller)

    return factory


# --- shared by every target, and on Mininet ------------------------------------------------


def workload_hot_keys(workload: "Workload", count: int) -> list[HotKey]:
    """The workload's ``count`` most popular keys, as the servers store them
    (rank table + ``nk_key_bytes``, the simulator's and kvclient's keys)."""
    ranks = workload.rank_info()[:count]
    ffi, lib = workload.ffi, workload.lib
    size = workload.key_size
    buf = ffi.new("uint8_t[]", size)
    keys = []
    for rec in ranks:
        lib.nk_key_bytes(int(rec["key"]), size, buf)
        keys.append(HotKey(bytes(ffi.buffer(buf, size)), int(rec["keyhash"]), int(rec["home"])))
    return keys


def mininet_controller_factory(cfg: RunConfig):  # type: ignore[no-untyped-def]
    """target=mininet: ``factory(plane) -> PegasusController`` over the rack's
    MininetControlPlane; prewarmed mode replicates the K hottest keys of the
    same workload the clients draw from (Workload.from_config)."""
    proto = cfg.protocol
    assert isinstance(proto, PegasusProtocol)

    def factory(plane: ControlPlane) -> PegasusController:
        prewarm: list[HotKey] = []
        if proto.mode == "prewarmed":
            from netkv.sim.engine import Workload

            with Workload.from_config(cfg) as workload:
                prewarm = workload_hot_keys(workload, replicated_keys(cfg))
        return PegasusController(plane, cfg, prewarm)

    return factory


# --- on BMv2 (p4src/pegasus/pegasus.p4) ---------------------------------------------------

SELECTIONS = {"random": 0, "rr": 1, "wrr": 2, "least_loaded": 3}  # PEG_SELECTION


def p4_defines(params: Params) -> dict[str, int]:
    """The P4 program's compile-time constants from the pipeline's params
    (the knobs pegasus.c reads in init)."""
    sel = param_str(params, "selection", "wrr")
    if sel not in SELECTIONS:
        raise ValueError(f"pegasus selection {sel!r}: one of {', '.join(SELECTIONS)}")
    fanout = param_str(params, "fanout", "reg")
    if fanout not in ("reg", "auto"):
        raise ValueError(f"pegasus fanout {fanout!r}: 'reg' or 'auto'")
    return {
        "PEG_MAX_RKEYS": param_int(params, "max_rkeys", 64),
        "PEG_SELECTION": SELECTIONS[sel],
        "PEG_AMO": int(bool(param_int(params, "amo", 0))),
        "PEG_SAMPLE": param_int(params, "sample", 128),
        "PEG_FANOUT_AUTO": int(fanout == "auto"),
        "PEG_FANOUT_DIV16": param_int(params, "fanout_div16", PEG_FANOUT_DIV_UNIT),
        "PEG_WRITE_MCAST": int(bool(param_int(params, "write_mcast", 1))),
    }


def p4_initial_registers(n_servers: int, params: Params) -> list[tuple[str, int, int]]:
    """The registers pegasus.c's init sets to non-zero (BMv2 starts at 0)."""
    n = param_int(params, "n_servers", n_servers)
    if not 1 <= n <= MAX_SERVERS:
        raise ValueError(f"pegasus n_servers {n}: 1..{MAX_SERVERS}")
    k = param_int(params, "max_rkeys", 64)
    writes = [("ver_next", 0, param_int(params, "ver_next", PEG_VER_NEXT_INITIAL)),
              ("n_servers", 0, n)]
    # pegasus.c wrr_uniform()
    writes.append(("wrr_len", 0, peg_wrr_len_initial(n)))
    writes += [("wrr_sched", i, peg_wrr_sched_initial(i, n)) for i in range(PEG_WRR_SLOTS)]
    writes.append(("wrr_cursor", 0, 0))
    writes += [("fanout", i, 1) for i in range(k)]
    return writes


PLUGIN = ProtocolPlugin(
    name="pegasus",
    summary="Pegasus coherence directory (OSDI'20)",
    targets=("sim", "mininet", "testbed"),
    config=PegasusProtocol,
    wire=Proto.PEGASUS,
    udp_port=PEGASUS_PORT,
    preload="all",  # a replicated key may be read on any server
    pipeline_params=pipeline_params,
    sim_controller=sim_controller_factory,
    rack_controller=mininet_controller_factory,
    dead_knobs=dead_knobs,
    refusals=REFUSALS,
    p4=P4Program("pegasus/pegasus.p4", defines=p4_defines,
                 initial_registers=p4_initial_registers),
)


if TYPE_CHECKING:
    import numpy as np

    from netkv.config.schema import RunConfig
    from netkv.sim.engine import SimEngine, Workload
