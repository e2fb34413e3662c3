"""MininetTarget: real packets through netkv-switch, real kvserver and kvclient.

The rack (netkv.mininet.rack) is built once per run: one Mininet host per
server and client, one switch node running netkv-switch with the protocol's
C pipeline, a kvserver on every server host (preloaded with its keys). Each
load point then starts one kvclient per client host, all at the same
CLOCK_MONOTONIC instant (namespaces share the clock), each offering
``offered / clients`` req/s of open-loop Poisson load for ``duration`` s,
and merges their histograms, timelines and counters into the same
``PointResult`` the simulator fills. Per-server load is what each kvserver
served during the point (counter snapshots before and after, via SIGUSR1).

What runs on the switch node is ``target.switch``'s back-end
(netkv.backends: netkv-switch by default, or BMv2 running the protocol's P4
program), prepared before the network starts (a back-end that cannot run
here refuses in one line, exit code 2) and handing the same controller its
``SwitchDriver``. What the protocol needs of the rack (its UDP port, which
servers preload a key, its controller) comes from its plug-in
(netkv.protocols); this module names neither.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from netkv.backends import backend_class
from netkv.backends.base import fault_per_egress, has_faults  # noqa: F401 - re-exported
from netkv.config.compose import ConfigError
from netkv.config.schema import RunConfig
from netkv.drivers.base import SwitchDriver
from netkv.protocols import lookup as protocol_plugin
from netkv.mininet.capture import RackCapture
from netkv.protocols.base import ControlPlane, Controller
from netkv.quantile import latency_summary, quantiles
from netkv.results import noise
from netkv.targets.base import PointResult, Target, TargetUnavailable
from netkv.targets.faults import FaultClock, FaultEvent, FaultRun

CONTROLLER_NICE = 10  # the controller thread's nice value during a point


# A protocol's controller on this target: made once per target from the
# rack's ControlPlane (netkv.mininet.control), ``start()``ed once, then
# ``epoch(t)`` every ``protocol.epoch_ms`` of wall time while clients run.
ControllerFactory = Callable[[ControlPlane], Controller]




def merge_hists(results: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    acc: dict[int, int] = {}
    for r in results:
        for lower, count in r["hist"]:
            acc[int(lower)] = acc.get(int(lower), 0) + int(count)
    keys = sorted(acc)
    return np.array(keys, dtype=np.float64), np.array([acc[k] for k in keys], dtype=np.int64)


def packets_dropped(noise: dict[str, Any]) -> int | None:
    """What the switch and the servers counted as dropped (their faults,
    pipeline and queue drops; the kernel's own are not seen); None when the
    switch keeps no such counters (BMv2): the servers' alone would look
    complete."""
    if "switch_dropped" not in noise:
        return None
    return int(noise["switch_dropped"]) + int(noise.get("servers_dropped", 0))


def merge_timelines(results: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The rack's windows from every client's: counts add up, and each
    window's quantiles are taken over the pooled buckets of every client (the
    simulator's meaning: one rack, not the worst client)."""
    lines = [r["timeline"] for r in results if r.get("timeline", {}).get("window_s")]
    if not lines:
        return {}
    n = min(len(t["issued"]) for t in lines)
    window = lines[0]["window_s"]
    sub_bits = int(lines[0]["sub_bits"])

    def total(key: str) -> np.ndarray:
        return np.sum([np.asarray(t[key][:n], dtype=np.int64) for t in lines], axis=0)

    lost = total("lost")
    p50, p99 = np.zeros(n), np.zeros(n)
    for w in range(n):
        lower, counts = merge_hists([t["hist"][w] for t in lines])
        # lost requests count as infinitely slow, as in the simulator's windows
        p50[w], p99[w] = quantiles(lower, counts, (0.5, 0.99), lost=int(lost[w]),
                                   sub_bits=sub_bits)
    return {
        "t_s": np.arange(n, dtype=np.float64) * window,
        "issued": total("issued"),
        "completed": total("completed"),
        "lost": lost,
        "p50_ns": p50,
        "p99_ns": p99,
    }


def controller_epoch_ms(cfg: RunConfig) -> float | None:
    """The controller epoch: the protocol's, but at least target.min_epoch_ms
    (an epoch costs a few ms of CPU on the hosts' own two cores here)."""
    epoch = getattr(cfg.protocol, "epoch_ms", None)
    return None if epoch is None else max(epoch, cfg.target.min_epoch_ms)


def check_machine(cfg: RunConfig) -> None:
    """Refuse in one line, before the run directory is written
    (runner.check_supported), a machine Mininet cannot run on: not root, no
    mnexec, no mininet package."""
    from netkv.mininet import rack

    try:
        rack.check_mininet()
    except RuntimeError as exc:
        raise TargetUnavailable(str(exc)) from None


def check_config(cfg: RunConfig, target: str = "mininet", applies_faults: bool = True) -> None:
    """Refuse, before anything is written, what this placement cannot run
    (``applies_faults``: the rack kills and restarts its kvservers and its
    switch, ``target.faults``)."""
    if cfg.topology.kind != "rack":
        raise TargetUnavailable(f"topology.kind = {cfg.topology.kind} on target={target}: one "
                                "switch only for now (allowed: rack; racks runs on target=sim)")
    if cfg.workload.kind == "trace":
        raise TargetUnavailable(f"workload=trace on target={target}: kvclient has no trace "
                                "workload yet (allowed: zipf, uniform, ycsb; a trace runs on "
                                "target=sim)")
    if not isinstance(cfg.workload.value_size, int):
        raise TargetUnavailable(f"workload.value_size = a mix of {len(cfg.workload.value_size)} "
                                f"sizes on target={target}: kvclient sends one fixed size for "
                                "now (allowed: one size in bytes; a mix runs on target=sim)")
    if cfg.workload.multiget.enabled and cfg.topology.retries:
        raise TargetUnavailable(f"topology.retries = {cfg.topology.retries} with multigets: "
                                f"target={target}'s kvclient does not resend a multiget "
                                "(allowed: 0)")
    crashes = cfg.target.faults.crashes
    if crashes and not applies_faults:
        raise TargetUnavailable(f"target.faults.crashes on target={target}: not applied there "
                                "yet (allowed: [])")
    if cfg.target.faults.switch_outages:
        if not applies_faults:
            raise TargetUnavailable(f"target.faults.switch_outages on target={target}: not "
                                    "applied there yet (allowed: [])")
        if not backend_class(cfg.target.switch).restartable:
            raise TargetUnavailable(f"target.faults.switch_outages with target.switch="
                                    f"{cfg.target.switch}: its program cannot be restarted "
                                    "here yet (allowed: [])")
        if cfg.capture:
            raise TargetUnavailable("target.faults.switch_outages with capture=true: the "
                                    "switch's capture does not survive its restart "
                                    "(allowed: [])")
    if cfg.workload.multiget.enabled and cfg.record_history:
        raise TargetUnavailable(f"record_history with multigets: target={target} records "
                                "single-key histories only (allowed: false)")


class MininetTarget(Target):
    """One rack of Mininet hosts around the switch back-end."""

    name = "mininet"
    # its rack kills and restarts kvservers and the switch (Rack, and
    # SshRack.crash_server / stop_switch for the testbed)
    applies_faults = True

    def __init__(self, cfg: RunConfig, controller_factory: ControllerFactory | None = None,
                 params: str = "") -> None:
        """``params``: the protocol's knobs ("key=value;..."), handed to the
        pipeline, the servers' and the clients' host logic alike."""
        super().__init__(cfg)
        self.params = self.target_params(cfg, params)
        self.plugin = protocol_plugin(cfg.protocol.name)
        backend_cls = backend_class(cfg.target.switch)
        backend_cls.preflight(cfg, self.plugin)   # one line, before anything else
        check_config(cfg, self.name, self.applies_faults)
        from netkv.mininet.rack import RackSpec

        self.check_placement()
        from netkv.sim.engine import capacity_factors

        t = cfg.target
        topo = cfg.topology
        self.capacity = capacity_factors(cfg)
        if (self.capacity != 1.0).any() and t.service_ns <= 0:
            raise ConfigError("invalid config: topology.server.slow_fraction/slow_capacity on "
                              f"target={self.name} need target.service_ns > 0 (a server's "
                              "capacity is emulated by its busy-wait per request)")
        # prepared before anything is started: a refusal or a compile error
        # leaves nothing behind
        self.backend = backend_cls(cfg, self.plugin, self.params)
        if cfg.capture and not self.backend.captures:
            raise ConfigError(f"invalid config: capture=true needs a switch back-end that "
                              f"captures (target.switch={cfg.target.switch} does not yet; "
                              "allowed: netkv)")
        self.state = self.new_state()
        self.controller_factory = controller_factory
        self.rack: Any = None
        # the back-end's driver (None when it keeps nothing connected without
        # a controller, as BMv2)
        self.driver: SwitchDriver | None = None
        self.plane: Any = None
        self.controller: Controller | None = None
        self.last_final: dict[str, Any] = {}
        self.histories: list[Path] = []   # kvclient CSV histories since the rack started
        self.points_run = 0
        # target.faults events count from the first point's start instant
        self.faults = FaultClock()
        # a switch outage (target.faults.switch_outages) and the control loop
        # take turns: no epoch while the switch is down or being reconnected
        self.switch_lock = threading.Lock()
        self.switch_restarts = 0      # switch restarts so far
        # req_ids go on over the points (servers with at-most-once remember them)
        self.next_req_id = [1] * cfg.topology.clients
        pargs = ("--params", self.params) if self.params else ()
        # a server of capacity c busy-waits service_ns / c per request
        per_server = tuple(("--service-ns", str(int(round(t.service_ns / c))))
                           for c in self.capacity)
        spec = RackSpec(
            protocol=cfg.protocol.name, servers=topo.servers, clients=topo.clients,
            tag=self.state.tag, folder=self.state.folder, backend=self.backend,
            # a written value is stored whole (kvserver keeps 1024 B by default)
            server_args=(*self.workload_args(), "--preload", self.preload_mode(),
                         "--max-value", str(max(1024, cfg.workload.max_value_size())), *pargs),
            per_server_args=per_server,
            coordinators=self.backend.n_coords,
            coordinator_args=(*self.workload_args(), *pargs),
        )
        try:
            self.rack = self.new_rack(spec)
            folder = self.state.folder
            self.driver = self.backend.connect(folder, controller_factory is not None)
            if has_faults(cfg):
                self.backend.apply_faults(self.driver)
            if controller_factory is not None:
                from netkv.mininet.control import MininetControlPlane

                driver, owned = self.backend.controller_driver(self.driver, folder)
                self.plane = MininetControlPlane(self.rack, self.plugin, self.capacity,
                                                 driver, owned)
                self.controller = controller_factory(self.plane)
                self.plane.restart_before_traffic = self.restart_closed()
                self.controller.start()
                self.plane.flush()
        except BaseException:
            self.close()
            raise

    # --- the placement: Mininet here, other racks (the testbed) override ----------

    def check_placement(self) -> None:
        """Refuse in one line what this placement cannot run here."""
        check_machine(self.cfg)

    def new_state(self) -> Any:
        """The run's local folder and record (``.tag``, ``.folder``, ``.pids``)."""
        from netkv.mininet.cleanup import RunState, clean

        clean()  # leftovers of crashed runs (never a live run's)
        return RunState.create()

    def new_rack(self, spec: Any) -> Any:
        from netkv.mininet.rack import Rack

        return Rack(spec, self.state)

    def release(self) -> None:
        """After the rack stopped: whatever it may have left."""
        from netkv.mininet.cleanup import clean_run

        clean_run(self.state.tag, self.state.pids)

    # --- configuration -> program arguments -------------------------------------

    @property
    def duration_s(self) -> float:
        """A point lasts at least target.min_duration_s: with real processes at
        thousands of req/s, a p99 needs thousands of requests behind it."""
        return max(self.cfg.duration, self.cfg.target.min_duration_s)

    def epoch_ms(self) -> float | None:
        return controller_epoch_ms(self.cfg)

    @staticmethod
    def target_params(cfg: RunConfig, params: str) -> str:
        """The protocol's params plus this target's: the servers' load-report
        window (``load_window_us``, read by host logic that reports load,
        ignored by the rest) spans one controller epoch unless set - the controller
        reads one report per epoch, and at the few thousand req/s a Mininet
        rack carries the host logic's 1 ms default holds about one request
        per server (WRR weights then chase noise)."""
        epoch_ms = controller_epoch_ms(cfg)
        if epoch_ms is None or "load_window_us=" in params:
            return params
        window_us = cfg.target.load_window_us or epoch_ms * 1e3
        extra = f"load_window_us={max(1, int(round(window_us)))}"
        return f"{params};{extra}" if params else extra


    def preload_mode(self) -> str:
        """Which servers hold a key before traffic: ``auto`` = the protocol's choice."""
        mode = self.cfg.target.preload
        return self.plugin.preload if mode == "auto" else mode

    def workload_args(self) -> list[str]:
        """The simulator's workload (netkv.sim.engine.Workload.from_config) as
        program arguments: same key space, placement, sizes and seed."""
        w, p = self.cfg.workload, self.cfg.protocol
        ring = getattr(p, "ring", "consistent")
        kind = "uniform" if w.kind == "zipf" and w.alpha == 0.0 else w.kind
        return ["--workload", kind, "--alpha", repr(float(w.alpha)), "--keys", str(w.keys),
                "--key-size", str(w.key_size), "--value-size", str(w.value_size),
                "--vnodes", str(getattr(p, "virtual_nodes", 16)),
                "--ring", {"equal_ranges": "equal", "hash_mod": "mod"}.get(ring, "consistent"),
                "--wl-seed", str(self.cfg.seed)]

    def multiget_args(self) -> list[str]:
        """kvclient's multiget sizes (the simulator's law, netkv.config.multiget)
        and the rack's coordinator hosts, when there are any."""
        out: list[str] = []
        mget = self.cfg.workload.multiget
        if mget.enabled:
            from netkv.config.multiget import size_weights

            assert mget.exponent is not None
            weights = size_weights(mget.max_keys, mget.exponent)
            out += ["--mget-weights", ",".join(f"{w:.12g}" for w in weights)]
        if self.backend.n_coords:
            out += ["--coords", str(self.backend.n_coords)]
        return out

    # --- Target ---------------------------------------------------------------------

    def capacity_hint_rps(self) -> float:
        t = self.cfg.target
        hint = t.max_rps
        if t.service_ns > 0:
            hint = min(hint, self.cfg.topology.servers * 1e9 / t.service_ns)
        return float(hint)

    def run_point(self, offered_rps: float, seed: int, history_dir: str | None = None) -> PointResult:
        assert self.rack is not None
        cfg = self.cfg
        topo = cfg.topology
        m = topo.clients
        # what fell due between points; a restart then is closed (if its
        # controller asks) with no client traffic in flight: what it drops
        # closed is counted in no point (docs/mininet.md "Switch outages")
        self.faults.catch_up(self._fault_events())
        self.rack.check_alive()
        before = self.rack.server_stats()
        lives = list(self.rack.incarnations)
        switch_life = self.switch_restarts
        refused_before = self._switch_refusals()
        switch_before = self.switch_counters()
        drain_s = max(topo.drain_ms / 1e3, 0.05)
        # the last hostile_clients clients send adversarial traffic (kvclient
        # --mode hostile, docs/security.md) beside the honest ones, who carry
        # the offered load, as in the simulator
        honest = m - topo.hostile_clients
        common = [*self.workload_args(), "--rate", repr(offered_rps / honest),
                  "--duration", repr(self.duration_s), "--drain", repr(drain_s),
                  "--write-ratio", repr(cfg.workload.write_ratio),
                  "--window-ms", repr(topo.timeline_ms),
                  "--timeout-us", repr(topo.timeout_us or 0.0), "--retries", str(topo.retries or 0)]
        if self.params:
            common += ["--params", self.params]
        common += self.multiget_args()
        hist_dir = history_dir or (str(self.state.folder) if cfg.record_history else None)
        args_for = []
        history: list[Path] = []
        self.points_run += 1
        point_no = self.points_run
        for j in range(m):
            a = [*common, "--seed", str((seed + 7919 * j) & ((1 << 62) - 1)),
                 "--first-req-id", str(self.next_req_id[j])]
            if hist_dir:
                history.append(Path(hist_dir) / f"history-p{point_no}-client{j}.csv")
                a += ["--history", str(history[-1]), "--value-tag", str(point_no & 0xFFFF)]
            if j >= honest:
                a += ["--mode", "hostile", "--rate", repr(topo.hostile_rps)]
            args_for.append(a)
        stop = threading.Event()
        failure: list[BaseException] = []
        ctl_thread: threading.Thread | None = None

        faults: list[FaultRun] = []

        def started(start_ns: int) -> None:
            nonlocal ctl_thread
            faults.append(self.faults.start(start_ns, self._fault_events()))
            if self.controller is not None:
                ctl_thread = threading.Thread(target=self._control_loop,
                                              args=(stop, start_ns, failure), daemon=True)
                ctl_thread.start()

        retry_s = (topo.timeout_us or 0.0) / 1e6 * ((topo.retries or 0) + 1)
        capture = self._start_capture()
        try:
            results = self.rack.run_clients(
                args_for, run_s=self.duration_s + drain_s + retry_s + 30.0,
                start_delay_ms=cfg.target.start_delay_ms, on_start=started)
        finally:
            stop.set()
            if ctl_thread is not None:
                ctl_thread.join(timeout=10)
            if capture is not None:
                self.last_capture = {"files": capture.stop()}
            # what is not due yet, the next point runs
            fault_failures = [f for f in (run.stop() for run in faults) if f is not None]
        if fault_failures:   # the point did not run the faults it was configured with
            raise fault_failures[0]
        if failure:
            raise RuntimeError(f"the {cfg.protocol.name} controller failed: "
                               f"{failure[0]!r}") from failure[0]
        for j, r in enumerate(results):
            self.next_req_id[j] = int(r.get("next_req_id", self.next_req_id[j]))
        hostile_sent = sum(int(r["hostile_sent"]) for r in results[honest:])
        results = results[:honest]
        # the servers keep their store between points: a history is checkable
        # only from the rack's start, so every recorded point so far goes in
        self.histories += history
        after = self.rack.server_stats()
        # a server restarted during the point counts from its new process's
        # start: what the killed one did since the point began left no dump
        before = [b if lives[i] == self.rack.incarnations[i] else {}
                  for i, b in enumerate(before)]
        if switch_life != self.switch_restarts:
            # restarted during the point: its counters start from the new program's
            switch_before, refused_before = {}, {}
        # what the switch and the servers dropped: a bad point vs a slow protocol
        point_noise = {**noise.switch_noise(switch_before, self.switch_counters()),
                       **noise.server_noise(before, after)}
        served = np.array([a["served"] - b.get("served", 0)
                           for a, b in zip(after, before, strict=True)], dtype=np.int64)
        # the trust boundary (docs/security.md): what the switch refused and
        # the servers ignored during this point, by reason
        refused = {k: v - refused_before.get(k, 0) for k, v in self._switch_refusals().items()}
        for why in ("ignored", "bad"):
            refused[f"servers.{why}"] = sum(a.get(why, 0) - b.get(why, 0)
                                            for a, b in zip(after, before, strict=True))
        lower, counts = merge_hists(results)
        issued = sum(r["issued"] for r in results)
        completed = sum(r["completed"] for r in results)
        timeouts = sum(r["timeouts"] for r in results)
        unfinished = sum(r["unfinished"] + r["overrun"] for r in results)
        # a client that completed nothing has no mean (0 x inf is NaN)
        mean = (sum(r["latency_ns"]["mean"] * r["completed"] for r in results if r["completed"])
                / completed) if completed else math.nan
        return PointResult(
            offered_rps=offered_rps,
            duration_s=self.duration_s,
            issued=issued,
            completed=completed,
            # kvclient's completions after its sending ended (its `late`)
            completed_late=sum(int(r.get("late", 0)) for r in results),
            dropped=timeouts + unfinished,
            timeouts=timeouts,
            latency_ns=latency_summary(lower, counts, issued - completed, mean),
            server_requests=served,
            hist_lower_ns=lower,
            hist_counts=counts,
            timeline=merge_timelines(results),
            # completed requests the switch answered itself, as kvclient tells them
            # (kvclient.c: a reply naming no server, where the wire names its replier)
            switch_replies=sum(r.get("switch_replies", 0) for r in results),
            retries=sum(int(r.get("retries", 0)) for r in results),
            refused=refused,
            forged_replies=sum(r.get("forged_replies", 0) for r in results),
            hostile_sent=hostile_sent,
            noise=point_noise,
            packets_dropped=packets_dropped(point_noise),
            client_packets=sum(int(r.get("sent_packets", 0)) for r in results),
            request_keys=sum(int(r.get("request_keys", 0)) for r in results),
            # the controller's own measurements of the point, as in the simulator
            controller_metrics=(dict(self.controller.point_metrics())
                                if self.controller is not None else {}),
        )

    def _fault_events(self) -> list[FaultEvent]:
        """target.faults.crashes: kill each server's kvserver at its ``at_s``
        and start a fresh one at its ``restart_s`` (if any), counted from the
        first point's start (Rack.crash_server, Rack.restart_server)."""
        events = []
        for i, crash in enumerate(self.cfg.target.faults.crashes):
            s = crash.server
            events.append(FaultEvent(("crash", i), crash.at_s, f"server {s}'s crash at "
                                     f"{crash.at_s:g} s", partial(self.rack.crash_server, s)))
            if crash.restart_s is not None:
                events.append(FaultEvent(("restart", i), crash.restart_s,
                                         f"server {s}'s restart at {crash.restart_s:g} s",
                                         partial(self.rack.restart_server, s)))
        for i, outage in enumerate(self.cfg.target.faults.switch_outages):
            events.append(FaultEvent(("switch down", i), outage.at_s,
                                     f"the switch's outage at {outage.at_s:g} s",
                                     self._switch_outage))
            if outage.restart_s is not None:
                events.append(FaultEvent(("switch up", i), outage.restart_s,
                                         f"the switch's restart at {outage.restart_s:g} s",
                                         self._switch_restart))
        return events

    def _switch_outage(self) -> None:
        """The switch program killed: every packet reaching it is lost."""
        with self.switch_lock:
            self.rack.stop_switch()
            if self.driver is not None:
                self.driver.close()
                self.driver = None

    def restart_closed(self) -> bool:
        """Whether a switch restart starts the program closed and opens it
        after the controller's ``start``: the controller asks for it
        (``Controller.restart_closed``: Pegasus) and the back-end can
        (``SwitchBackend.closed_args``). Any other restart starts it open,
        as a controller whose ``start`` needs answers through the switch
        (NetCache's and StarCache's fetches, KVSwitch's pushes) would have
        them dropped while it is closed."""
        return bool(self.backend.closed_args) and bool(
            getattr(self.controller, "restart_closed", False))

    def _switch_restart(self) -> None:
        """A fresh switch program, its state empty. The controller installs
        its state again as soon as it has reconnected (``Controller.start``,
        as on the simulator), as a P4Runtime controller does when the
        switch's stream comes back: waiting for its next epoch would leave
        the switch empty for up to an epoch (NetMC's is 1 s). For a
        controller that asks (``restart_closed``) it starts closed and is
        opened only then, as a switch forwards nothing until its control
        plane has programmed it: no packet meets the empty state
        (``ControlPlane.restart_before_traffic``). It is opened even if
        ``start`` or the flush raised (the fault event then fails in one
        line, ``FaultFailed``), so traffic is not left dropped."""
        closed = self.restart_closed()
        with self.switch_lock:
            self.rack.start_switch(closed)
            folder = self.state.folder
            self.driver = self.backend.connect(folder, self.controller is not None)
            try:
                if has_faults(self.cfg):
                    self.backend.apply_faults(self.driver)
                self.switch_restarts += 1
                if self.plane is not None and self.controller is not None:
                    self.plane.attach(*self.backend.controller_driver(self.driver, folder))
                    self.controller.start()
                    self.plane.flush()
            finally:
                if closed:
                    self.backend.open(self.driver)

    def _start_capture(self) -> RackCapture | None:
        """capture=true: this point's switch ports and hosts (netkv.mininet.capture)."""
        if self.capture_dir is None:
            return None
        lim = self.cfg.capture_limits
        cap = RackCapture(self.rack, self.backend, self.driver, self.capture_dir, lim.snaplen,
                          int(lim.max_mb * 1e6), lim.max_packets)
        cap.start()
        return cap

    def _switch_refusals(self) -> dict[str, int]:
        """The protocol's refusal registers now (plug-in ``refusals``)."""
        if self.driver is None:
            return {}
        return {f"switch.{why}": self.driver.reg_read(reg, idx)
                for why, (reg, idx) in self.plugin.refusals.items()}

    def _control_loop(self, stop: threading.Event, start_ns: int,
                      failure: list[BaseException]) -> None:
        """``controller.epoch(t)`` every epoch_ms of wall time from the clients'
        start until they are done (missed epochs are skipped, not bunched)."""
        assert self.controller is not None and self.plane is not None
        epoch_s = (self.epoch_ms() or 100.0) / 1e3
        # the controller stands for the switch's own control CPU; here it
        # shares two cores with the emulated data path: let that go first
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), CONTROLLER_NICE)
        except OSError:
            pass
        next_t = start_ns / 1e9 + epoch_s
        try:
            while True:
                now = time.clock_gettime_ns(time.CLOCK_MONOTONIC) / 1e9
                if stop.wait(max(0.0, next_t - now)):
                    return
                with self.switch_lock:
                    if not self.rack.switch_down:
                        self.controller.epoch(self.plane.now_s)
                        self.plane.flush()
                now = time.clock_gettime_ns(time.CLOCK_MONOTONIC) / 1e9
                next_t = max(next_t + epoch_s, now + 0.2 * epoch_s)
        except BaseException as exc:  # reported by run_point
            failure.append(exc)

    def write_history(self, path: Path) -> bool:
        """history.jsonl of every point recorded on this rack so far (the
        servers' store carries over from point to point, so the last point's
        operations alone need not be linearizable from an empty store)."""
        if not self.histories:
            return False
        from netkv.mininet.history import write_history

        write_history(self.histories, Path(path))
        return True

    def switch_counters(self) -> dict[str, int]:
        """The switch's counters; a back-end that keeps no driver connected
        without a controller (BMv2) has none."""
        if self.driver is None:
            return {}
        return self.driver.counters()

    def close(self) -> None:
        if getattr(self, "plane", None) is not None:
            self.plane.close()
            self.plane = None
        if self.driver is not None:
            self.driver.close()
            self.driver = None
        if self.rack is not None:
            try:
                self.last_final = self.rack.stop()
            finally:
                self.rack = None
        if getattr(self, "state", None) is not None:
            self.release()
