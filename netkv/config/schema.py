"""Pydantic models of the composed config: what a run is allowed to be.

Hydra composes ``conf/`` and the command-line overrides; ``RunConfig``
validates the result. Every model forbids unknown keys so that a misspelled
key is an error, not a silently ignored setting.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from netkv.backends import available_on
from netkv.config.base import Frac, NonNeg, Pos, ProtocolBase, Strict
from netkv.protocols import config_models, names as protocol_names

__all__ = ["Frac", "NonNeg", "Pos", "ProtocolBase", "Strict", "RunConfig"]

# --- protocols -------------------------------------------------------------

# One model per protocol, each in its own module (netkv/protocols/<name>.py),
# told apart by ``name``: the union is the registry's, never edited here.
Protocol = Annotated[Union[config_models()], Field(discriminator="name")]  # type: ignore[misc]


# --- workload --------------------------------------------------------------


class SizeChoice(Strict):
    size: int = Field(ge=0, le=1 << 20)
    weight: Pos


class Dynamics(Strict):
    kind: Literal["none", "hot-in", "random", "swap"] = "none"
    period_s: Pos = 10.0
    count: int = Field(100, ge=1)
    hot_pool: int = Field(10_000, ge=1)


class Workload(Strict):
    kind: Literal["zipf", "uniform", "ycsb", "trace"]
    alpha: NonNeg
    keys: int = Field(ge=1)
    write_ratio: Frac
    key_size: int = Field(64, ge=1, le=64)
    value_size: int | list[SizeChoice] = 128
    multiget_keys: int = Field(1, ge=1, le=32)
    dynamics: Dynamics = Dynamics()
    trace: str | None = None

    @model_validator(mode="after")
    def _trace_needs_path(self) -> "Workload":
        if self.kind == "trace" and not self.trace:
            raise ValueError("workload.trace: a trace workload needs a file path")
        return self


# --- topology, target, slo -------------------------------------------------


class ServerModel(Strict):
    workers: int = Field(1, ge=1, le=64)
    service: Literal["deterministic", "exponential", "lognormal"] = "exponential"
    service_ns: Pos = 5_000.0
    per_byte_ns: NonNeg = 0.0
    lognormal_sigma: Pos = 0.5
    slow_fraction: Frac = 0.0
    slow_capacity: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    queue_limit: int = Field(0, ge=0)  # requests queued per server (0 = unbounded)
    # shared: one FIFO feeds every worker; by_key: keys are partitioned over
    # the workers (worker = mix64(keyhash) mod workers, one FIFO each), as with
    # per-core stores behind RSS, so one hot key can use only one core.
    dispatch: Literal["shared", "by_key"] = "shared"


class Topology(Strict):
    kind: Literal["rack"] = "rack"
    servers: int = Field(ge=1)
    clients: int = Field(ge=1, le=1024)
    link_latency_ns: NonNeg = 1_000.0
    link_gbps: NonNeg = 25.0
    switch_latency_ns: NonNeg = 500.0
    server: ServerModel = ServerModel()
    # Bytes a frame carries besides the UDP payload: Ethernet 14 + IPv4 20 +
    # UDP 8 + FCS 4 + preamble/IFG 20 (what serialization delay is charged on).
    frame_overhead_bytes: int = Field(66, ge=0)
    recirc_gbps: NonNeg = 100.0  # recirculation port bandwidth (0 = unlimited)
    cpu_queue: int = Field(4096, ge=1)  # switch -> controller packet channel
    client_cpu_ns: NonNeg = 0.0  # client CPU cost per request (one core per client)
    timeout_us: NonNeg = 0.0  # client timeout (0 = none: the Pegasus artifact)
    retries: int = Field(0, ge=0)  # resends after a timeout, same req_id
    # Measurement (simulator): stragglers may complete for drain_ms after the
    # last arrival; the timeline is cut into windows of timeline_ms.
    drain_ms: NonNeg = 50.0
    timeline_ms: NonNeg = 10.0


class ServerCrash(Strict):
    server: int = Field(ge=0)
    at_s: NonNeg
    restart_s: NonNeg | None = None  # None = stays down


class Faults(Strict):
    # Each applies to every traversal of the chosen links (a request and its
    # reply cross four: client up, server down, server up, client down).
    loss: Frac = 0.0
    duplicate: Frac = 0.0
    reorder: Frac = 0.0  # fraction of packets held back ...
    reorder_us: NonNeg = 10.0  # ... by a uniform extra delay in [0, reorder_us]
    delay_us: NonNeg = 0.0  # constant extra one-way delay per hop
    links: Literal["all", "clients", "servers"] = "all"
    crashes: list[ServerCrash] = []


class Target(Strict):
    name: Literal["sim", "mininet", "testbed"]
    description: str = ""
    # the switch back-end (netkv.backends): netkv = the C pipeline (in-process
    # on the simulator, netkv-switch on a rack); bmv2 = the P4 program
    switch: str = "netkv"
    faults: Faults = Faults()
    # target=mininet (real processes; ignored by the simulator)
    service_ns: NonNeg = 0.0  # kvserver busy-wait per request: emulated capacity (0 = none)
    max_rps: Pos = 50_000.0  # ceiling of the load search on this machine
    # auto: what the protocol asks for (its plug-in's ``preload``)
    preload: Literal["auto", "home", "all", "none"] = "auto"
    spin_us: NonNeg = 0.0  # netkv-switch busy-polls this long after traffic (0 = sleep at once)
    start_delay_ms: NonNeg = 20.0  # clients start together this long after all are ready
    # servers' load reports (Pegasus `load_window_us`) cover this long; 0 = one
    # controller epoch (at Mininet's thousands of req/s a 1 ms window holds ~1)
    load_window_us: NonNeg = 0.0
    min_duration_s: NonNeg = 0.0  # mininet: a point lasts at least this long
    min_epoch_ms: NonNeg = 0.0  # mininet: the controller epoch is at least this long

    @model_validator(mode="after")
    def _switch_runs_here(self) -> "Target":
        allowed = available_on(self.name)
        if self.switch not in allowed:
            raise ValueError(
                f"target.switch = '{self.switch}' is not available on target={self.name} "
                f"(allowed: {', '.join(allowed) or 'none'})")
        return self


class Slo(Strict):
    kind: Literal["auto", "fixed"]
    # auto: whose unloaded median the SLO is a multiple of: a protocol (the
    # conf default is the hash baseline: the plain server path on the same
    # rack, so that every protocol of a comparison meets the same bound, the
    # Pegasus paper's single 50 us SLO), or self = the protocol's own (a
    # switch cache's median is a switch hit).
    reference: str = "hash"
    percentile: Annotated[float, Field(gt=0.0, lt=100.0)] = 99.0
    factor: Pos = 5.0
    p99_us: Pos | None = None
    min_completion: Frac = 0.99
    precision: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.02
    unloaded_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.05
    max_points: int = Field(24, ge=2)

    @model_validator(mode="after")
    def _reference_exists(self) -> "Slo":
        allowed = ["self", *protocol_names()]
        if self.reference not in allowed:
            raise ValueError(f"slo.reference = '{self.reference}' (allowed: {', '.join(allowed)})")
        return self

    @model_validator(mode="after")
    def _fixed_needs_bound(self) -> "Slo":
        if self.kind == "fixed" and self.p99_us is None:
            raise ValueError("slo.p99_us: a fixed SLO needs p99_us (microseconds)")
        return self


# --- capture ---------------------------------------------------------------


class CaptureLimits(Strict):
    """Bounds of every capture file (one per switch port and per host):
    frames cut to snaplen bytes; a file stops at max_mb or max_packets and
    counts what it left out (docs/debugging.md)."""

    snaplen: int = Field(256, ge=64, le=65535)
    max_mb: Pos = 64.0
    max_packets: int = Field(1_000_000, ge=1)


# --- the whole run ---------------------------------------------------------


class RunConfig(Strict):
    # Top-level shortcuts come first so that their errors are reported under
    # the name the user typed (alpha, not workload.alpha).
    name: str = Field(min_length=1)
    alpha: NonNeg
    write_ratio: Frac
    servers: int = Field(ge=1)
    clients: int = Field(ge=1)
    seed: int = Field(ge=0, lt=1 << 63)
    duration: Pos
    keys: int = Field(ge=1)
    record_history: bool = False
    capture: bool = False
    capture_limits: CaptureLimits = CaptureLimits()
    out: str | None = None
    protocol: Protocol
    target: Target
    workload: Workload
    topology: Topology
    slo: Slo

    @model_validator(mode="after")
    def _servers_within_protocol_limit(self) -> "RunConfig":
        limit = self.protocol.max_servers
        if self.topology.servers > limit:
            raise ValueError(
                f"servers = {self.topology.servers} (allowed: 1..{limit} for protocol "
                f"{self.protocol.name})"
            )
        return self
