"""Typed wrappers over the C simulator: Workload, SimEngine, and the controller hook.

  Workload    the key space, placement and popularity of one run (built once
              per target: O(N) setup, shared by every load point)
  SimEngine   one open-loop load point; run it to the end, or in epochs with
              a controller called between them (``run(controller=...)``)
  Controller  what a protocol's controller implements to run in the sim:
              ``epoch(engine, t_s)``; it drives the switch only through the
              engine's register/table/packet hooks (the SwitchDriver surface)
  SimError    a C-side setup error (bad parameter), with the engine's message

Both wrappers own C memory and free it in ``close()`` (or on garbage
collection); use them as context managers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from netkv.config.compose import ConfigError
from netkv.config.multiget import size_weights
from netkv.config.schema import RunConfig, SizeChoice
from netkv.constants import MAX_MCAST_GROUPS
from netkv.sim import native


class SimError(ConfigError):
    """The C engine refused a configuration; str() is its one-line reason."""


class Controller(Protocol):
    """A protocol controller run between simulator epochs."""

    def epoch(self, engine: "SimEngine", t_s: float) -> None: ...


@runtime_checkable
class RestartAware(Protocol):
    """A controller told at once when the switch restarts empty
    (target.faults.switch_outages), as a P4Runtime controller sees the
    switch's stream come back, rather than at its next epoch."""

    def switch_back(self, engine: "SimEngine", t_s: float) -> None: ...


# ---------------------------------------------------------------------------
# workload


def value_classes(value_size: int | list[SizeChoice]) -> tuple[list[int], list[float]]:
    """Value sizes and weights: one fixed size, or a weighted mix."""
    if isinstance(value_size, int):
        return [value_size], [1.0]
    if not 1 <= len(value_size) <= 16:
        raise SimError("workload.value_size: 1..16 size classes")
    return [c.size for c in value_size], [c.weight for c in value_size]


def read_trace(path: str | Path) -> tuple[np.ndarray, np.ndarray | None]:
    """A trace file: one request per line, ``<key id>`` or ``<op> <key id>``
    with op in R/W/GET/PUT/READ/WRITE (any case); '#' starts a comment.
    Returns (key ids as uint32, ops as uint8 1=write or None if no ops given)."""
    keys: list[int] = []
    ops: list[int] = []
    have_ops = False
    writes = {"w", "put", "write", "set", "update"}
    reads = {"r", "get", "read"}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SimError(f"workload.trace: cannot read {path}: {exc}") from None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace(",", " ").split()
        try:
            if len(parts) == 1:
                keys.append(int(parts[0]))
                ops.append(0)
            elif len(parts) == 2:
                op = parts[0].lower()
                if op not in writes | reads:
                    raise ValueError(op)
                have_ops = True
                ops.append(1 if op in writes else 0)
                keys.append(int(parts[1]))
            else:
                raise ValueError(line)
            if not 0 <= keys[-1] <= 0xFFFFFFFF:
                raise ValueError(keys[-1])
        except ValueError:
            raise SimError(f"workload.trace: {path}:{lineno}: expected '<key id>' or "
                           f"'<R|W> <key id>', got {raw!r}") from None
    if not keys:
        raise SimError(f"workload.trace: {path} has no requests")
    return np.asarray(keys, dtype=np.uint32), (np.asarray(ops, dtype=np.uint8) if have_ops else None)


RANK_DTYPE = np.dtype([("key", "<u4"), ("keyhash", "<u4"), ("home", "<u2"),
                       ("vclass", "<u2"), ("value_len", "<u4")])   # struct nk_rank_info
ALIAS_DTYPE = np.dtype([("thresh", "<u4"), ("alias", "<u4")])       # struct nk_alias_entry


class Workload:
    """Keys, placement and popularity (hostapps/include/netkv/workload.h)."""

    def __init__(
        self,
        *,
        kind: str,
        keys: int,
        alpha: float,
        seed: int,
        servers: int,
        key_size: int = 64,
        virtual_nodes: int = 16,
        ring: str = "consistent",
        value_size: int | list[SizeChoice] = 128,
        trace: str | None = None,
        tables: tuple[np.ndarray, np.ndarray | None] | None = None,
    ) -> None:
        """``tables``: (rank table, alias table or None) another Workload with
        the same arguments exported (``rank_info``, ``alias_table``): copied
        in instead of computed (zipf/uniform; netkv.sim.workload_cache)."""
        self.ffi, self.lib = native.load()
        ffi = self.ffi
        if kind not in native.WL_KIND:
            raise SimError(f"workload.kind: {kind!r} (allowed: {', '.join(native.WL_KIND)})")
        if kind == "zipf" and alpha == 0.0:
            kind = "uniform"  # identical distribution, cheaper sampling
        self.kind = kind
        self.alpha = alpha
        self.n_keys = keys
        self.servers = servers
        self.key_size = key_size
        c = ffi.new("struct nk_workload_cfg *")
        c.kind = native.WL_KIND[kind]
        c.n_keys = keys
        c.alpha = alpha
        c.seed = seed
        c.key_size = key_size
        c.n_servers = servers
        c.vnodes = virtual_nodes
        c.ring_mode = native.RING_MODE[ring]
        sizes, weights = value_classes(value_size)
        c.n_value_classes = len(sizes)
        for i, (s, w) in enumerate(zip(sizes, weights, strict=True)):
            c.value_sizes[i] = s
            c.value_weights[i] = w
        self._keep: list[Any] = []
        if kind == "trace":
            if not trace:
                raise SimError("workload.trace: a trace workload needs a file path")
            tk, to = read_trace(trace)
            kbuf = ffi.from_buffer("uint32_t[]", tk)
            c.trace_keys = kbuf
            c.trace_len = len(tk)
            self._keep += [tk, kbuf]
            if to is not None:
                obuf = ffi.from_buffer("uint8_t[]", to)
                c.trace_ops = obuf
                self._keep += [to, obuf]
        err = ffi.new("char[256]")
        if tables is None:
            ptr = self.lib.nk_workload_new(c, err, 256)
        else:
            ranks, alias = tables
            if len(ranks) != keys or (alias is not None and len(alias) != keys):
                raise SimError(f"workload tables: {len(ranks)} ranks for {keys} keys")
            ptr = self.lib.nk_workload_from_tables(
                c, ffi.from_buffer("struct nk_rank_info[]", ranks),
                ffi.NULL if alias is None else ffi.from_buffer("struct nk_alias_entry[]", alias),
                err, 256)
        if ptr == ffi.NULL:
            raise SimError(ffi.string(err).decode())
        self._ptr = ffi.gc(ptr, self.lib.nk_workload_free)
        self._rank_info: np.ndarray | None = None

    @staticmethod
    def config_args(cfg: RunConfig) -> dict[str, Any]:
        """Every input a Workload is built from (workload_cache keys on them)."""
        w, p = cfg.workload, cfg.protocol
        return dict(
            kind=w.kind,
            keys=w.keys,
            alpha=w.alpha,
            seed=cfg.seed,
            servers=cfg.topology.servers,
            key_size=w.key_size,
            virtual_nodes=p.virtual_nodes,
            ring=getattr(p, "ring", "consistent"),
            value_size=w.value_size,
            trace=w.trace,
        )

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "Workload":
        return cls(**cls.config_args(cfg))

    @property
    def ptr(self) -> Any:
        return self._ptr

    def rank_info(self) -> np.ndarray:
        """Structured array over ranks (zipf/uniform: rank 0 = hottest; ycsb
        and trace: indexed by key id): key, keyhash, home, vclass, value_len."""
        if self._rank_info is None:
            dtype = RANK_DTYPE
            assert dtype.itemsize == self.ffi.sizeof("struct nk_rank_info")
            table = self.lib.nk_workload_rank_table(self._ptr)
            buf = self.ffi.buffer(table, self.n_keys * dtype.itemsize)
            self._rank_info = np.frombuffer(buf, dtype=dtype).copy()
            # shared by every target of the process (workload_cache): read-only
            self._rank_info.flags.writeable = False
        return self._rank_info

    def alias_table(self) -> np.ndarray | None:
        """The zipf sampler's alias table (thresh, alias per rank), a view of
        the C table valid while this Workload lives; None unless zipf."""
        table = self.lib.nk_workload_alias_table(self._ptr)
        if table == self.ffi.NULL:
            return None
        buf = self.ffi.buffer(table, self.n_keys * ALIAS_DTYPE.itemsize)
        return np.frombuffer(buf, dtype=ALIAS_DTYPE)

    def probabilities(self) -> np.ndarray:
        """Exact request probability of each rank (zipf/uniform only)."""
        if self.kind == "uniform":
            return np.full(self.n_keys, 1.0 / self.n_keys)
        if self.kind != "zipf":
            raise SimError(f"exact probabilities are defined for zipf/uniform, not {self.kind}")
        return zipf_probabilities(self.n_keys, self.alpha)

    def close(self) -> None:
        if getattr(self, "_ptr", None) is not None:
            self.ffi.release(self._ptr)  # runs nk_workload_free now
            self._ptr = None

    def __enter__(self) -> "Workload":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def zipf_probabilities(n: int, alpha: float) -> np.ndarray:
    """p_r = (r+1)^-alpha / H(n, alpha), summed from the smallest term."""
    w = np.arange(1, n + 1, dtype=np.float64) ** -alpha
    return w / math.fsum(w[::-1])


# ---------------------------------------------------------------------------
# one load point


@dataclass
class Stats:
    """Counters and latency summary of a (possibly running) load point."""

    now_s: float
    finished: bool
    events: int
    issued: int
    completed: int
    timeouts: int
    retries: int
    unfinished: int
    dup_replies: int
    switch_replies: int
    dropped: int
    drop_loss: int
    drop_queue: int
    drop_crash: int
    drop_switch: int
    drop_outage: int
    cpu_packets: int
    cpu_dropped: int
    dyn_changes: int
    hostile_sent: int
    forged_replies: int
    server_ignored: int
    client_packets: int
    req_keys: int
    recirculated: int
    switch_restarts: int
    mean_ns: float
    p50_ns: float
    p90_ns: float
    p99_ns: float
    p999_ns: float
    max_ns: float
    n_windows: int
    server_p50_ns: float
    server_p99_ns: float
    switch_p50_ns: float
    switch_p99_ns: float
    switch_packets: int = 0  # packets the pipeline processed (switch_mpps bounds them)
    completed_late: int = 0  # completions after the arrivals ended (in the drain)

    @property
    def completion(self) -> float:
        return self.completed / self.issued if self.issued else 1.0


_STATS_FIELDS = [f for f in Stats.__dataclass_fields__]


class SimEngine:
    """One simulated open-loop load point (hostapps/include/netkv/sim.h)."""

    def __init__(self, cfg: RunConfig, workload: Workload, offered_rps: float, seed: int,
                 params: str = "") -> None:
        self.ffi, self.lib = native.load()
        ffi = self.ffi
        self.workload = workload
        self.cfg = cfg
        top, srv, faults = cfg.topology, cfg.topology.server, cfg.target.faults
        c = ffi.new("struct nk_sim_cfg *")
        self._proto = ffi.new("char[]", cfg.protocol.name.encode())
        c.protocol = self._proto
        self._params = ffi.new("char[]", params.encode()) if params else ffi.NULL
        c.params = self._params
        c.n_servers = top.servers
        c.n_clients = top.clients
        c.seed = seed
        c.offered_rps = offered_rps
        c.duration_s = cfg.duration
        c.drain_s = top.drain_ms / 1e3
        c.write_ratio = cfg.workload.write_ratio
        c.link_latency_ns = top.link_latency_ns
        c.link_gbps = top.link_gbps
        c.switch_latency_ns = top.switch_latency_ns
        c.recirc_gbps = top.recirc_gbps
        c.frame_overhead = top.frame_overhead_bytes
        c.cpu_queue = top.cpu_queue
        c.workers = srv.workers
        c.service = native.SERVICE[srv.service]
        c.service_ns = srv.service_ns
        c.per_byte_ns = srv.per_byte_ns
        c.lognormal_sigma = srv.lognormal_sigma
        self.capacity = capacity_factors(cfg)
        self._cap = ffi.new("double[]", self.capacity.tolist())
        c.capacity = self._cap
        c.queue_limit = srv.queue_limit
        c.dispatch = native.DISPATCH[srv.dispatch]
        c.client_cpu_ns = top.client_cpu_ns
        c.client_tx_ns = top.client_tx_ns
        c.client_key_ns = top.client_key_ns
        c.client_rx_ns = top.client_rx_ns
        c.client_pair_ns = top.client_pair_ns
        c.client_cores = top.client_cores
        c.per_key_ns = -1.0 if srv.per_key_ns is None else srv.per_key_ns
        c.n_coords, c.coord_cores = cfg.protocol.coordinators()
        mget = cfg.workload.multiget
        if mget.enabled:
            assert mget.exponent is not None  # solved by the schema
            weights = size_weights(mget.max_keys, mget.exponent)
            self._mget_weights = ffi.new("double[]", weights.tolist())
            c.mget_max = mget.max_keys
            c.mget_weights = self._mget_weights
        c.timeout_ns = (top.timeout_us or 0.0) * 1e3  # None (auto, unresolved): off
        c.retries = top.retries or 0
        c.loss = faults.loss
        c.duplicate = faults.duplicate
        c.reorder = faults.reorder
        c.reorder_ns = faults.reorder_us * 1e3
        c.extra_delay_ns = faults.delay_us * 1e3
        c.fault_links = native.FAULT_LINKS[faults.links]
        dyn = cfg.workload.dynamics
        c.dyn_kind = native.DYN_KIND[dyn.kind]
        c.dyn_period_s = dyn.period_s
        c.dyn_count = dyn.count
        c.dyn_hot_pool = dyn.hot_pool
        c.window_s = top.timeline_ms / 1e3
        c.record_history = int(cfg.record_history)
        c.hostile_clients = top.hostile_clients
        c.hostile_rps = top.hostile_rps
        c.client_max_rps = top.client_max_rps
        c.switch_mpps = top.switch_mpps
        c.tx_ns = srv.tx_ns
        c.racks = top.racks if top.kind == "racks" else 0
        err = ffi.new("char[256]")
        ptr = self.lib.nk_sim_new(c, workload.ptr, err, 256)
        if ptr == ffi.NULL:
            raise SimError(ffi.string(err).decode())
        self._ptr = ffi.gc(ptr, self.lib.nk_sim_free)
        self._switch = 0  # the switch the controller hooks act on (select_switch)
        self.offered_rps = offered_rps
        self.seed = seed
        for crash in faults.crashes:
            if crash.server >= top.servers:
                raise SimError(f"target.faults.crashes: server {crash.server} "
                               f"(allowed: 0..{top.servers - 1})")
            restart = -1.0 if crash.restart_s is None else crash.restart_s * 1e9
            if self.lib.nk_sim_schedule_crash(self._ptr, crash.server, crash.at_s * 1e9, restart):
                raise SimError(f"target.faults.crashes: cannot schedule {crash}")
        for outage in faults.switch_outages:
            restart = -1.0 if outage.restart_s is None else outage.restart_s * 1e9
            if self.lib.nk_sim_schedule_switch_outage(self._ptr, outage.at_s * 1e9, restart):
                raise SimError(f"target.faults.switch_outages: cannot schedule {outage}")

    # -- running ---------------------------------------------------------

    @property
    def now_s(self) -> float:
        return self.lib.nk_sim_now_ns(self._ptr) / 1e9

    @property
    def end_s(self) -> float:
        return self.lib.nk_sim_end_ns(self._ptr) / 1e9

    def run_until(self, t_s: float) -> bool:
        """Process every event up to simulated time t_s; True when the run is over."""
        return bool(self.lib.nk_sim_run_until(self._ptr, t_s * 1e9))

    def run(self, controller: Controller | None = None, epoch_s: float | None = None) -> Stats:
        """Run to the end. With a controller, stop every epoch_s of simulated
        time, call ``controller.epoch(self, t)``, and resume; a RestartAware
        controller is also stopped at each switch restart (``switch_back``)."""
        if controller is None:
            self.lib.nk_sim_run(self._ptr)
            return self.stats()
        if not epoch_s or epoch_s <= 0:
            raise SimError("a controller needs a positive epoch (protocol.epoch_ms)")
        aware = controller if isinstance(controller, RestartAware) else None
        backs = sorted(o.restart_s for o in self.cfg.target.faults.switch_outages
                       if o.restart_s is not None) if aware is not None else []
        k = 1
        while True:
            t_epoch = k * epoch_s
            if aware is not None and backs and backs[0] <= t_epoch:
                t_back = backs.pop(0)
                if self.run_until(t_back):
                    break
                aware.switch_back(self, t_back)
                continue
            if self.run_until(t_epoch):
                break
            controller.epoch(self, t_epoch)
            k += 1
        return self.stats()

    # -- results ---------------------------------------------------------

    def stats(self) -> Stats:
        st = self.ffi.new("struct nk_sim_stats *")
        self.lib.nk_sim_stats(self._ptr, st)
        vals = {f: getattr(st, f) for f in _STATS_FIELDS}
        vals["finished"] = bool(vals["finished"])
        return Stats(**vals)

    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        """(bucket lower bounds in ns, counts), trimmed after the last
        non-empty bucket."""
        n = self.lib.nk_sim_hist(self._ptr, self.ffi.NULL, self.ffi.NULL, 0)
        lower = np.zeros(n, dtype=np.uint64)
        counts = np.zeros(n, dtype=np.uint64)
        self.lib.nk_sim_hist(self._ptr, self.ffi.from_buffer("uint64_t[]", lower),
                             self.ffi.from_buffer("uint64_t[]", counts), n)
        nz = np.flatnonzero(counts)
        end = int(nz[-1]) + 1 if len(nz) else 0
        return lower[:end].astype(np.float64), counts[:end].astype(np.int64)

    def server_counts(self) -> np.ndarray:
        out = np.zeros(self.cfg.topology.servers, dtype=np.uint64)
        self.lib.nk_sim_server_counts(self._ptr, self.ffi.from_buffer("uint64_t[]", out))
        return out.astype(np.int64)

    def link_bytes(self) -> tuple[np.ndarray, np.ndarray]:
        """Bytes serialized on each node's uplink and on the switch's
        downlink to it (frames with their overhead): what link_gbps bounds."""
        n = self.lib.nk_sim_link_bytes(self._ptr, self.ffi.NULL, self.ffi.NULL, 0)
        up = np.zeros(n, dtype=np.uint64)
        down = np.zeros(n, dtype=np.uint64)
        self.lib.nk_sim_link_bytes(self._ptr, self.ffi.from_buffer("uint64_t[]", up),
                                   self.ffi.from_buffer("uint64_t[]", down), n)
        return up.astype(np.float64), down.astype(np.float64)

    def timeline(self) -> dict[str, np.ndarray]:
        n = self.stats().n_windows
        if n == 0:
            return {}
        issued = np.zeros(n, dtype=np.uint64)
        completed = np.zeros(n, dtype=np.uint64)
        lost = np.zeros(n, dtype=np.uint64)
        p50 = np.zeros(n, dtype=np.float64)
        p99 = np.zeros(n, dtype=np.float64)
        fb = self.ffi.from_buffer
        self.lib.nk_sim_timeline(self._ptr, fb("uint64_t[]", issued), fb("uint64_t[]", completed),
                                 fb("uint64_t[]", lost), fb("double[]", p50), fb("double[]", p99),
                                 n)
        window = self.cfg.topology.timeline_ms / 1e3
        return {
            "t_s": np.arange(n, dtype=np.float64) * window,
            "issued": issued.astype(np.int64),
            "completed": completed.astype(np.int64),
            "lost": lost.astype(np.int64),
            "p50_ns": p50,
            "p99_ns": p99,
        }

    def rank_keys(self) -> np.ndarray:
        """The current rank -> key id table (changes with dynamics)."""
        n = self.workload.n_keys
        out = np.zeros(n, dtype=np.uint32)
        self.lib.nk_sim_rank_keys(self._ptr, self.ffi.from_buffer("uint32_t[]", out), n)
        return out

    def history(self) -> np.ndarray:
        """Per-request records (record_history): structured array indexed by
        req_id - 1 with invoke_ns, done_ns, ver, client, key, keyhash, write,
        outcome (0 open, 1 ok, 2 timeout), found."""
        dtype = np.dtype([("invoke_ns", "<u8"), ("done_ns", "<u8"), ("ver", "<u8"),
                          ("client", "<u4"), ("key", "<u4"), ("keyhash", "<u4"),
                          ("write", "u1"), ("outcome", "u1"), ("found", "u1"), ("rsvd", "u1")])
        assert dtype.itemsize == self.ffi.sizeof("struct nk_sim_op")
        n = int(self.lib.nk_sim_history(self._ptr, self.ffi.NULL, 0))
        out = np.zeros(n, dtype=dtype)
        if n:
            self.lib.nk_sim_history(self._ptr, self.ffi.cast("struct nk_sim_op *",
                                                             self.ffi.from_buffer(out)), n)
        return out

    def version_owners(self) -> dict[tuple[int, int], int]:
        """(keyhash, version) -> serial of the write whose value it holds
        (native.OWNER_INITIAL for the preloaded value)."""
        n = int(self.lib.nk_sim_version_owners(self._ptr, self.ffi.NULL, self.ffi.NULL,
                                               self.ffi.NULL, 0))
        kh = np.zeros(n, dtype=np.uint32)
        ver = np.zeros(n, dtype=np.uint64)
        own = np.zeros(n, dtype=np.uint64)
        fb = self.ffi.from_buffer
        self.lib.nk_sim_version_owners(self._ptr, fb("uint32_t[]", kh), fb("uint64_t[]", ver),
                                       fb("uint64_t[]", own), n)
        return {(int(k), int(v)): int(o) for k, v, o in zip(kh, ver, own, strict=True)}

    def server_ctl(self, server: int, line: str) -> str:
        """A control command to one server's host logic; its reply text."""
        out = self.ffi.new("char[4096]")
        rc = self.lib.nk_sim_server_ctl(self._ptr, server, line.encode(), out, 4096)
        reply = self.ffi.string(out).decode(errors="replace")
        if rc < 0 and not reply:
            raise SimError(f"server {server}: control command refused: {line!r}")
        return reply

    def server_up(self, server: int) -> bool:
        """The server's port status (False while crashed)."""
        rc = self.lib.nk_sim_server_up(self._ptr, server)
        if rc < 0:
            raise SimError(f"server {server}: the rack has servers 0..{self.cfg.topology.servers - 1}")
        return bool(rc)

    def store_merge(self, src: int, dst: int) -> int:
        """Copy server ``src``'s written keys to ``dst`` where newer; how many."""
        n = int(self.lib.nk_sim_store_merge(self._ptr, src, dst))
        if n < 0:
            raise SimError(f"store merge {src} -> {dst} failed")
        return n

    def store_newest(self, server: int) -> int:
        """The highest version server ``server``'s store holds."""
        n = int(self.lib.nk_sim_store_newest(self._ptr, server))
        if n < 0:
            raise SimError(f"server {server}: the rack has servers 0..{self.cfg.topology.servers - 1}")
        return n

    # -- switch driver surface (for controllers) -------------------------

    # -- several switches (topology.kind = racks) ---------------------------

    @property
    def switches(self) -> int:
        """1, or 1 + racks: 0 is the spine, 1 + r rack r's leaf."""
        return int(self.lib.nk_sim_switches(self._ptr))

    def select_switch(self, sw: int) -> None:
        """The switch the controller hooks below (registers, tables, groups,
        CPU channel) act on from now on (0 at start)."""
        if sw == self._switch:
            return
        if self.lib.nk_sim_select_switch(self._ptr, sw):
            raise ValueError(f"switch {sw}: allowed 0..{self.switches - 1}")
        self._switch = sw

    def switch_stats(self) -> dict[str, np.ndarray]:
        """Per switch: packets its pipeline processed, packets it dropped,
        and a leaf's trunk bytes toward the spine (up) and from it (down)."""
        n = self.switches
        out = {name: np.zeros(n, dtype=np.uint64)
               for name in ("packets", "dropped", "trunk_up_bytes", "trunk_down_bytes")}
        self.lib.nk_sim_switch_stats(self._ptr, *(self.ffi.from_buffer("uint64_t[]", a)
                                                  for a in out.values()), n)
        return out

    def reg_read(self, name: str, idx: int = 0) -> int:
        val = self.ffi.new("uint64_t *")
        rc = self.lib.nk_sim_reg_read(self._ptr, name.encode(), idx, val)
        if rc:
            raise KeyError(f"register {name}[{idx}]: error {rc}")
        return int(val[0])

    def reg_read_range(self, name: str, first: int, count: int) -> list[int]:
        out = self.ffi.new("uint64_t[]", max(count, 1))
        rc = self.lib.nk_sim_reg_read_range(self._ptr, name.encode(), first, count, out)
        if rc:
            raise KeyError(f"register {name}[{first}..{first + count - 1}]: error {rc}")
        return list(self.ffi.unpack(out, count))

    def reg_write(self, name: str, idx: int, value: int) -> None:
        rc = self.lib.nk_sim_reg_write(self._ptr, name.encode(), idx, value)
        if rc:
            raise KeyError(f"register {name}[{idx}]: error {rc}")

    def table_add(self, table: str, key: list[int], args: list[int]) -> None:
        k = self.ffi.new("uint64_t[]", key or [0])
        a = self.ffi.new("uint64_t[]", args or [0])
        rc = self.lib.nk_sim_table_add(self._ptr, table.encode(), k, len(key), a, len(args))
        if rc:
            raise KeyError(f"table {table} add {key} -> {args}: error {rc}")

    def table_del(self, table: str, key: list[int]) -> None:
        k = self.ffi.new("uint64_t[]", key or [0])
        rc = self.lib.nk_sim_table_del(self._ptr, table.encode(), k, len(key))
        if rc:
            raise KeyError(f"table {table} delete {key}: error {rc}")

    def mcast_set(self, group: int, ports: list[int]) -> None:
        if not 0 <= group < MAX_MCAST_GROUPS:
            raise ValueError(f"multicast group {group}: out of range (allowed: "
                             f"0..{MAX_MCAST_GROUPS - 1}, as on netkv-switch)")
        p = self.ffi.new("uint16_t[]", ports or [0])
        if self.lib.nk_sim_mcast_set(self._ptr, group, p, len(ports)):
            raise ValueError(f"multicast group {group} -> {ports}: bad port (allowed: the "
                             "switch's ports, up to its recirculation port)")

    def cpu_recv(self, max_packets: int = 1024) -> list[tuple[int, Any]]:
        """Packets the pipeline sent to the controller: [(src node, struct nk_msg *)]."""
        out = self.ffi.new("struct nk_msg[]", max_packets)
        src = self.ffi.new("uint16_t[]", max_packets)
        n = self.lib.nk_sim_cpu_recv(self._ptr, out, src, max_packets)
        # out[i] borrows from `out`, which dies with this call: hand back
        # owning copies (struct nk_msg * reads like the struct itself)
        copies = []
        for i in range(n):
            msg = self.ffi.new("struct nk_msg *", out[i])
            copies.append((int(src[i]), msg))
        return copies

    def extend(self, extra_s: float) -> None:
        """After the run: let controller traffic run extra_s more (read-backs)."""
        if self.lib.nk_sim_extend(self._ptr, extra_s * 1e9):
            raise SimError(f"extend: {extra_s} s (must be > 0)")

    def cpu_send(self, msg: Any, dst: int) -> None:
        """Packet-out through the switch pipeline, addressed to node dst."""
        if self.lib.nk_sim_cpu_send(self._ptr, msg, dst):
            raise RuntimeError("cpu_send failed")

    def new_msg(self) -> Any:
        return self.ffi.new("struct nk_msg *")

    def capture(self, folder: Path, snaplen: int, max_bytes: int, max_packets: int) -> None:
        """Write every frame on a switch node port or the CPU port from now on
        (sim.h nk_sim_capture): switch-p<port>.pcap, switch-cpu.pcap."""
        err = self.ffi.new("char[256]")
        if self.lib.nk_sim_capture(self._ptr, str(folder).encode(), snaplen, max_bytes,
                                   max_packets, err, 256):
            raise SimError(self.ffi.string(err).decode())

    def capture_stats(self) -> dict[str, dict[str, Any]]:
        """Per capture file: frames written, frames a bound left out, and the
        seconds spent capturing (``busy_s``: the capture's cost)."""
        n = self.cpu_port + 1
        packets = self.ffi.new("uint64_t[]", n)
        missed = self.ffi.new("uint64_t[]", n)
        busy = self.ffi.new("uint64_t[]", n)
        k = self.lib.nk_sim_capture_stats(self._ptr, packets, missed, busy, n)
        names = [f"switch-p{i}.pcap" for i in range(k - 1)] + ["switch-cpu.pcap"]
        return {name: {"packets": int(packets[i]), "missed": int(missed[i]),
                       "busy_s": busy[i] / 1e9} for i, name in enumerate(names[:k])}

    @property
    def cpu_port(self) -> int:
        return int(self.lib.nk_sim_cpu_port(self._ptr))

    @property
    def recirc_port(self) -> int:
        return int(self.lib.nk_sim_recirc_port(self._ptr))

    def close(self) -> None:
        if getattr(self, "_ptr", None) is not None:
            self.ffi.release(self._ptr)  # runs nk_sim_free now
            self._ptr = None

    def __enter__(self) -> "SimEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def capacity_factors(cfg: RunConfig) -> np.ndarray:
    """Per-server capacity: the last round(slow_fraction * n) servers run at
    slow_capacity (Pegasus' heterogeneous rack), the rest at 1."""
    n = cfg.topology.servers
    srv = cfg.topology.server
    cap = np.ones(n, dtype=np.float64)
    slow = int(round(srv.slow_fraction * n))
    if slow:
        cap[n - slow:] = srv.slow_capacity
    return cap
