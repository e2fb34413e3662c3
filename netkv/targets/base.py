"""Target: the interface every switch target implements (sim, mininet, testbed).

The runner fixes the SLO and searches the offered load (``netkv.slo``); a
target only has to measure one open-loop load point at a time. Results come
back as plain numpy arrays so that every target fills the same schema
(``docs/results.md``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from netkv.config.compose import ConfigError
from netkv.config.schema import RunConfig
from netkv.quantile import quantiles

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
BY_SOURCE = ("server_p50", "server_p99", "switch_p50", "switch_p99")


class TargetUnavailable(ConfigError):
    """A piece the chosen target or switch back-end needs is not here (exit 2)."""


@dataclass
class PointResult:
    """What one open-loop load point measured."""

    offered_rps: float
    duration_s: float
    issued: int
    completed: int
    dropped: int
    timeouts: int
    latency_ns: dict[str, float]  # "mean", "p50", "p90", "p99", "p999"
    server_requests: np.ndarray  # requests served per server (int64, len = servers)
    # Log-linear latency histogram: bucket lower bounds (ns) and counts.
    hist_lower_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    hist_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # Per-window timeline: the columns of docs/results.md "timeline.parquet"
    # (t_s, issued, completed, lost, p50_ns, p99_ns), the same on every target.
    timeline: dict[str, np.ndarray] = field(default_factory=dict)
    switch_replies: int = 0  # requests answered by the switch itself (NetCache)
    # completed requests' latency quantiles by who sent the final reply: a
    # server or the switch itself (keys BY_SOURCE), where the target tells
    # them apart (the simulator)
    latency_by_source: dict[str, float] = field(default_factory=dict)
    retries: int = 0  # resends after a timeout (same req_id); `timeouts` = give-ups
    # The trust boundary (docs/security.md, topology.hostile_clients): what the
    # switch refused by reason ("switch.<reason>") and the servers ignored
    # ("servers.<reason>"), replies honest clients ignored as not theirs, and
    # messages the hostile clients sent.
    refused: dict[str, int] = field(default_factory=dict)
    forged_replies: int = 0
    hostile_sent: int = 0
    # Each server's service capacity (req/s), where the target knows it: the
    # fluid saturated throughput of docs/results.md needs it.
    server_capacity_rps: np.ndarray | None = None
    # The other finite rates the target knows (docs/results.md
    # `sat_tput_rps`): resource -> the offered load (req/s) at which it
    # saturates at this point's mix ("clients", "switch", "links").
    resource_bounds_rps: dict[str, float] = field(default_factory=dict)
    # The protocol controller's own measurements of the point (columns of
    # points.parquet named by the controller: Controller.point_metrics).
    controller_metrics: dict[str, Any] = field(default_factory=dict)
    client_packets: int = 0  # packets the clients sent (a multiget may be several)
    request_keys: int = 0  # keys the issued requests asked for (multigets: their sizes)
    # noise indicators (netkv.results.noise.COLUMNS): machine busyness, and the
    # switch's and servers' received/dropped/malformed counts where real
    noise: dict[str, float] = field(default_factory=dict)
    # completions after the arrivals ended, in the drain: a saturated point's
    # backlog, which would otherwise count as served within the run
    completed_late: int = 0
    # packets the rack dropped, where the target sees them (the simulator:
    # every drop; Mininet/testbed: the switch's and the servers' counters;
    # None: no counters, e.g. BMv2); `dropped` counts requests
    packets_dropped: int | None = None

    @property
    def achieved_rps(self) -> float:
        """The served rate: requests completed while the load ran, per second."""
        done = self.completed - self.completed_late
        return done / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def completion(self) -> float:
        return self.completed / self.issued if self.issued else 1.0

    @property
    def lost(self) -> int:
        """Requests issued that never completed (timed out, or still open)."""
        return max(self.issued - self.completed, 0)

    def tail_ns(self, percentile: float) -> float:
        """Any percentile (0 < p < 100) of the point's latency over every
        issued request, the lost ones infinitely slow: from the histogram,
        through the one quantile function (netkv.quantile)."""
        return quantiles(self.hist_lower_ns, self.hist_counts, [percentile / 100.0],
                         self.lost)[0]


class Target(ABC):
    """One way of running a protocol: prepare once, then measure load points."""

    name: str
    # latency measured on the machine's clock (real packets): hypervisor
    # steal can distort it, so a stolen point is measured again
    real_time: bool = True
    # two racks of this placement cannot be up at once (the same hosts and
    # ports): the SLO reference's rack is then up only before the protocol's
    one_rack_at_a_time: bool = False
    # the switch program runs on another host (the testbed's switch host):
    # a back-end checks there only what this machine needs to drive it
    switch_elsewhere: bool = False
    # takes its workload from a shared cache (``workloads=`` keyword,
    # netkv.sim.workload_cache): the runner hands one down
    builds_workloads: bool = False

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        # capture=true: the runner names each point's capture folder here, and
        # run_point leaves what it wrote in last_capture (capture.json)
        self.capture_dir: Path | None = None
        self.last_capture: dict[str, Any] | None = None

    def set_client_retries(self, timeout_us: float, retries: int) -> None:
        """The clients' timeout and resends for the points from here on (the
        runner resolves the automatic ones once the SLO bound is known)."""
        top = self.cfg.topology.model_copy(update={"timeout_us": timeout_us,
                                                   "retries": retries})
        self.cfg = self.cfg.model_copy(update={"topology": top})

    @abstractmethod
    def capacity_hint_rps(self) -> float:
        """An upper bound on the rack's throughput, to seed the load search."""

    @abstractmethod
    def run_point(self, offered_rps: float, seed: int) -> PointResult:
        """Run one open-loop Poisson load point at ``offered_rps`` for
        ``cfg.duration`` seconds and return what it measured."""

    def write_history(self, path: Path) -> bool:  # noqa: B027 - optional hook
        """Write the last point's client history (record_history) to ``path``;
        False when the target recorded none."""
        return False

    def provenance(self) -> dict[str, Any]:
        """What this target knows of the machines that measure, beyond the
        orchestrator's own provenance (the testbed: per host); merged into
        provenance.json once the target is up."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release processes, namespaces or memory."""

    def __enter__(self) -> "Target":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
