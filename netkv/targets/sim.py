"""SimTarget: the discrete-event simulator (target=sim).

The workload (key space, placement, popularity table) is built once per
target from ``cfg.seed``; every load point then runs a fresh engine seeded
with the point's seed (arrivals, service times, faults), so points are
independent and the same (config, seed) always gives the same numbers.
Protocols with a controller pass a ``controller_factory``; the engine stops
every ``protocol.epoch_ms`` of simulated time and calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from netkv.config.schema import RunConfig
from netkv.sim import native
from netkv.sim.history import write_history
from netkv.sim.workload_cache import WorkloadCache, workload_key
from netkv.sim.racks import SwitchEpochs
from netkv.sim.engine import (Controller, SimEngine, SimError, Stats, capacity_factors,
                              read_trace, value_classes)
from netkv.config.multiget import size_weights
from netkv.quantile import latency_summary
from netkv.protocols import lookup
from netkv.targets.base import BY_SOURCE, PointResult, Target

ControllerFactory = Callable[[SimEngine], Controller]


@dataclass
class HistoryData:
    """What ``record_history`` captured in one point (see netkv.sim.history)."""

    ops: np.ndarray
    owners: dict[tuple[int, int], int]


def check_config(cfg: RunConfig) -> None:
    """Refuse, before anything is written, what the simulator cannot run."""
    if cfg.topology.kind == "racks" and cfg.capture:
        raise SimError("capture with topology.kind=racks: one switch's ports only (allowed: "
                       "capture=false, or topology.kind=rack)")
    if cfg.topology.kind == "racks" and cfg.target.faults.switch_outages:
        raise SimError("target.faults.switch_outages with topology.kind=racks: not modelled "
                       "(allowed: [])")
    # the protocol's controller factory refuses what its controller cannot run
    # (KVSwitch across racks); building it is cheap: the work waits for an engine
    lookup(cfg.protocol.name).sim_controller(cfg)
    if cfg.workload.kind == "trace" and cfg.workload.trace:
        keys, _ = read_trace(cfg.workload.trace)
        if len(keys) and int(keys.max()) >= cfg.workload.keys:
            raise SimError(f"workload.trace: key id {int(keys.max())} in {cfg.workload.trace} "
                           f"(allowed: 0..{cfg.workload.keys - 1}, below keys)")


def metrics(controller: Controller | None) -> dict[str, Any]:
    """The controller's point metrics, if it measures any."""
    get = getattr(controller, "metrics", None)
    return dict(get()) if callable(get) else {}


class SimTarget(Target):
    """One rack simulated in-process by libnetkv's engine."""

    name = "sim"
    real_time = False   # simulated time: steal slows the run, not its numbers
    builds_workloads = True

    def __init__(self, cfg: RunConfig, controller_factory: ControllerFactory | None = None,
                 params: str = "", workloads: WorkloadCache | None = None) -> None:
        """``workloads``: where the workload comes from (shared with the
        run's other racks or the figure's processes); a private one if None."""
        super().__init__(cfg)
        # what the protocol's switch refuses, by reason: reason -> (register, index)
        self.refusals = dict(lookup(cfg.protocol.name).refusals)
        self.workload = (workloads if workloads is not None else WorkloadCache()).get(cfg)
        self.controller_factory = controller_factory
        self.params = params
        self.last_engine_stats = None
        self.last_history: HistoryData | None = None

    def capacity_hint_rps(self) -> float:
        """Sum of every server's service rate over the server requests one
        request makes (an upper bound: skew only lowers it), and no more
        than the honest clients may send (topology.client_max_rps)."""
        hint = float(self.server_capacity_rps().sum()) / self.server_requests_per_request()
        top = self.cfg.topology
        if top.client_max_rps > 0:
            hint = min(hint, top.client_max_rps * (top.clients - top.hostile_clients))
        return hint

    def resource_bounds_rps(self, st: Stats, up: np.ndarray, down: np.ndarray,
                            switch_packets: int | None = None) -> dict[str, float]:
        """The fluid bound of each finite rate besides the servers': the
        offered load at which it is busy all the time, from what one request
        cost it at this point (packets a client sent, packets the switch
        processed, bytes on the busiest link). ``switch_packets``: the
        busiest switch's, with racks (each switch has its own rate)."""
        top = self.cfg.topology
        out: dict[str, float] = {}
        if st.issued <= 0:
            return out
        if top.client_max_rps > 0 and st.client_packets > 0:
            honest = top.clients - top.hostile_clients
            out["clients"] = honest * top.client_max_rps * st.issued / st.client_packets
        packets = st.switch_packets if switch_packets is None else switch_packets
        if top.switch_mpps > 0 and packets > 0:
            out["switch"] = top.switch_mpps * 1e6 * st.issued / packets
        busiest = max(float(up.max(initial=0.0)), float(down.max(initial=0.0)))
        if top.link_gbps > 0 and busiest > 0:
            out["links"] = top.link_gbps * 1e9 / 8 * st.issued / busiest
        return out

    def server_requests_per_request(self) -> float:
        """Server requests per request: 1, or for multigets the expected
        groups (distinct servers of k keys placed uniformly, over the size
        law), writes counting 1."""
        if not self.cfg.workload.multiget.enabled:
            return 1.0
        w = self.cfg.workload.write_ratio
        return w + (1.0 - w) * self.multiget_groups()

    def multiget_groups(self) -> float:
        """Expected server groups of a multiget: distinct servers of k keys
        placed uniformly, over the size law."""
        mget = self.cfg.workload.multiget
        assert mget.exponent is not None
        n = self.cfg.topology.servers
        k = np.arange(1, mget.max_keys + 1, dtype=np.float64)
        return float(np.dot(size_weights(mget.max_keys, mget.exponent),
                            n * (1.0 - (1.0 - 1.0 / n) ** k)))

    def server_capacity_rps(self) -> np.ndarray:
        """Each server's service rate (server requests/s) at the workload's
        mean value size; for multigets, of their sub-requests (one per server
        group, with its share of the keys and values)."""
        srv = self.cfg.topology.server
        sizes, weights = value_classes(self.cfg.workload.value_size)
        mean_bytes = float(np.average(sizes, weights=weights))
        # one reply per request
        per_request_ns = srv.service_ns + srv.tx_ns + srv.per_byte_ns * mean_bytes
        mget = self.cfg.workload.multiget
        if mget.enabled:
            per_sub = mget.mean / self.multiget_groups()  # keys per sub-request
            per_key = srv.service_ns if srv.per_key_ns is None else srv.per_key_ns
            per_request_ns = (srv.service_ns + srv.tx_ns + per_key * (per_sub - 1.0)
                              + srv.per_byte_ns * mean_bytes * per_sub)
        return np.asarray(capacity_factors(self.cfg), dtype=np.float64) * (
            srv.workers * 1e9 / per_request_ns)

    def _controller(self, eng: SimEngine) -> Controller | None:
        """The protocol's controller; with racks one per switch, each
        given that switch's view (netkv.sim.racks)."""
        if not self.controller_factory:
            return None
        if eng.switches == 1:
            return self.controller_factory(eng)
        return SwitchEpochs(eng, self.controller_factory)

    @staticmethod
    def _reg_sum(eng: SimEngine, reg: str, idx: int) -> int:
        """A refusal counter over every switch."""
        total = 0
        for sw in range(eng.switches):
            eng.select_switch(sw)
            total += eng.reg_read(reg, idx)
        eng.select_switch(0)
        return total

    def run_point(self, offered_rps: float, seed: int) -> PointResult:
        with SimEngine(self.cfg, self.workload, offered_rps, seed, self.params) as eng:
            if self.capture_dir is not None:
                lim = self.cfg.capture_limits
                eng.capture(self.capture_dir, lim.snaplen, int(lim.max_mb * 1e6), lim.max_packets)
            controller = self._controller(eng)
            epoch_ms = getattr(self.cfg.protocol, "epoch_ms", None)
            st = eng.run(controller, epoch_ms / 1e3 if controller and epoch_ms else None)
            lower, counts = eng.histogram()
            up, down = eng.link_bytes()
            sw = eng.switch_stats()
            # the trunks too (racks): a rack's trunk carries all of its traffic
            up = np.concatenate([up, sw["trunk_up_bytes"].astype(np.float64)])
            down = np.concatenate([down, sw["trunk_down_bytes"].astype(np.float64)])
            self.last_engine_stats = st
            if self.capture_dir is not None:
                self.last_capture = {"files": eng.capture_stats()}
            refused = {f"switch.{why}": self._reg_sum(eng, reg, idx)
                       for why, (reg, idx) in self.refusals.items()}
            refused["servers.ignored"] = st.server_ignored
            # servers get messages, not bytes, here: nothing can fail to decode
            # (the column is kept so that every target writes the same schema)
            refused["servers.bad"] = 0
            if self.cfg.record_history:
                self.last_history = HistoryData(eng.history(), eng.version_owners())
            return PointResult(
                offered_rps=offered_rps,
                duration_s=self.cfg.duration,
                issued=st.issued,
                completed=st.completed,
                completed_late=st.completed_late,
                dropped=st.issued - st.completed,
                packets_dropped=st.dropped,
                timeouts=st.timeouts,
                retries=st.retries,
                latency_ns=latency_summary(lower, counts, st.issued - st.completed, st.mean_ns),
                server_requests=eng.server_counts(),
                hist_lower_ns=lower,
                hist_counts=counts,
                timeline=eng.timeline(),
                switch_replies=st.switch_replies,
                latency_by_source={k: getattr(st, f"{k}_ns") for k in BY_SOURCE},
                refused=refused,
                forged_replies=st.forged_replies,
                hostile_sent=st.hostile_sent,
                server_capacity_rps=self.server_capacity_rps(),
                resource_bounds_rps=self.resource_bounds_rps(
                    st, up, down, int(sw["packets"].max())),
                controller_metrics=metrics(controller),
                client_packets=st.client_packets,
                request_keys=st.req_keys,
            )

    def write_history(self, path: Path) -> bool:
        if self.last_history is None:
            return False
        write_history(self.last_history.ops, self.last_history.owners, path)
        return True

    def close(self) -> None:
        # a shared workload (workload_cache) is freed once nobody holds it
        if workload_key(self.cfg) is None:
            self.workload.close()
