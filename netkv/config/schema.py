"""Pydantic models of the composed config: what a run is allowed to be.

Hydra composes ``conf/`` and the command-line overrides; ``RunConfig``
validates the result. Every model forbids unknown keys so that a misspelled
key is an error, not a silently ignored setting.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from netkv.backends import available_on
from netkv.config.base import (
    MAX_CLIENTS,
    MAX_DURATION_S,
    MAX_KEYS,
    MAX_RACKS,
    MAX_SERVERS,
    MAX_TOTAL_SERVERS,
    MAX_VALUE_BYTES,
    Alpha,
    Frac,
    Gbps,
    Micros,
    Millis,
    Nanos,
    NonNeg,
    Pos,
    PosNanos,
    ProtocolBase,
    Strict,
)
from netkv.config.multiget import EXPONENT_RANGE, mean_size, solve_exponent
from netkv.protocols import config_models, lookup, names as protocol_names
from netkv.testbed.inventory import Inventory

__all__ = ["Frac", "NonNeg", "Pos", "ProtocolBase", "Strict", "RunConfig"]

# --- protocols -------------------------------------------------------------

# One model per protocol, each in its own module (netkv/protocols/<name>.py),
# told apart by ``name``: the union is the registry's, never edited here.
Protocol = Annotated[Union[config_models()], Field(discriminator="name")]  # type: ignore[misc]


# --- workload --------------------------------------------------------------


# The largest UDP payload each target carries: Mininet's netkv-switch,
# kvserver and kvclient hold a frame in 2,048 B (NK_FRAME_MAX) less Ethernet,
# IPv4 and UDP headers; the simulator models sizes and has no buffers.
MAX_UDP_PAYLOAD = {"mininet": 2048 - 14 - 20 - 8}
# kvclient encodes each packet of a request into one datagram of at most
# this much UDP payload (NK_DGRAM_PAYLOAD_MAX: a 1,500 B IPv4 packet) on the
# targets with real hosts (a protocol may split a write into several: host.h
# client_split); a larger packet would be counted as a send error, never sent
HOST_DGRAM_PAYLOAD = 1472
HOST_TARGETS = ("mininet", "testbed")
MAX_TIMELINE_WINDOWS = 1_000_000  # the simulator's per-window tables (engine.c)
MAX_CLIENT_CORES = 1024  # NK_SIM_MAX_CLIENT_CORES (sim.h)
NAME_PATTERN = r"^[A-Za-z0-9_.,+=@%-]+$"  # one path component, no separators


class SizeChoice(Strict):
    size: int = Field(ge=0, le=MAX_VALUE_BYTES)
    weight: Annotated[float, Field(gt=0.0, le=1e9)]


class Dynamics(Strict):
    kind: Literal["none", "hot-in", "random", "swap"] = "none"
    period_s: Annotated[float, Field(gt=0.0, le=MAX_DURATION_S)] = 10.0
    count: int = Field(100, ge=1, le=MAX_KEYS)
    hot_pool: int = Field(10_000, ge=1, le=MAX_KEYS)


MAX_MULTIGET_KEYS = 64  # NK_MAX_REQ_KEYS (host.h)


def _rounded_down(bound: float, digits: int = 5) -> str:
    """``bound`` to ``digits`` significant digits, toward zero, so an upper
    bound printed is never above the true one (15.97896 -> 15.978, not 15.979)."""
    step = 10.0 ** (math.floor(math.log10(abs(bound))) - digits + 1) if bound else 1.0
    return f"{math.floor(bound / step) * step:.{digits}g}"


class Multiget(Strict):
    """Multiget sizes (reads only; writes stay single-key): a discrete power
    law P(k) ∝ k^-exponent truncated to [1, max_keys], the exponent solved
    from ``mean`` (netkv.config.multiget). mean = 1: single-key requests."""

    mean: Annotated[float, Field(ge=1.0, le=MAX_MULTIGET_KEYS)] = 1.0
    max_keys: int = Field(16, ge=1, le=MAX_MULTIGET_KEYS)
    # solved from mean (leave unset); the resolved config reports it
    exponent: Annotated[float, Field(ge=-60.0, le=60.0)] | None = None

    @model_validator(mode="after")
    def _solve_exponent(self) -> "Multiget":
        if self.mean == 1.0:
            return self
        if not self.mean < self.max_keys:
            raise ValueError(f"workload.multiget.mean = {self.mean:g} (allowed: 1, or between "
                             f"1 and max_keys = {self.max_keys}, exclusive)")
        try:
            solved = solve_exponent(self.mean, self.max_keys)
        except ValueError:
            top = mean_size(self.max_keys, EXPONENT_RANGE[0])
            raise ValueError(f"workload.multiget.mean = {self.mean:.10g} (allowed: 1, or above 1 "
                             f"and below {_rounded_down(top)} with max_keys = {self.max_keys}: the size "
                             f"law's exponent is solved within {list(EXPONENT_RANGE)})") from None
        if self.exponent is not None and abs(
                mean_size(self.max_keys, self.exponent) - self.mean) > 1e-6 * self.mean:
            raise ValueError(
                f"workload.multiget.exponent = {self.exponent:g} gives mean "
                f"{mean_size(self.max_keys, self.exponent):.4g}, not mean = {self.mean:g} "
                "(allowed: unset; it is solved from mean)")
        object.__setattr__(self, "exponent", solved)
        return self

    @property
    def enabled(self) -> bool:
        return self.mean > 1.0


class Workload(Strict):
    kind: Literal["zipf", "uniform", "ycsb", "trace"]
    alpha: Alpha
    keys: int = Field(ge=1, le=MAX_KEYS)
    write_ratio: Frac
    key_size: int = Field(64, ge=1, le=64)
    value_size: Annotated[int, Field(ge=0, le=MAX_VALUE_BYTES)] | Annotated[
        list[SizeChoice], Field(min_length=1, max_length=16)] = 128
    multiget: Multiget = Multiget()
    dynamics: Dynamics = Dynamics()
    trace: str | None = None

    @model_validator(mode="after")
    def _trace_needs_path(self) -> "Workload":
        if self.kind == "ycsb" and not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha = {self.alpha:g} (allowed: 0 < alpha < 1 for workload "
                             "ycsb, the scrambled Zipfian's theta)")
        if self.kind == "trace" and self.multiget.enabled:
            raise ValueError(f"workload.multiget.mean = {self.multiget.mean:g} (allowed: 1 with "
                             "a trace workload, whose lines are single keys)")
        if self.kind == "trace":
            if not self.trace or self.trace == "???":
                raise ValueError("workload.trace: a trace workload needs a file path "
                                 "(workload.trace=<file>)")
            if not _is_file(self.trace):
                raise ValueError(f"workload.trace = {self.trace!r}: no such file "
                                 "(allowed: a readable trace file)")
        return self

    def max_value_size(self) -> int:
        sizes = self.value_size
        return sizes if isinstance(sizes, int) else max(c.size for c in sizes)


def _is_file(path: str) -> bool:
    try:
        return "\0" not in path and Path(path).is_file()
    except OSError:  # a name too long, a loop of links, ...
        return False


# --- topology, target, slo -------------------------------------------------


class ServerModel(Strict):
    workers: int = Field(1, ge=1, le=64)
    service: Literal["deterministic", "exponential", "lognormal"] = "exponential"
    service_ns: PosNanos = 5_000.0
    per_byte_ns: Nanos = 0.0
    # CPU per message a server sends, on top of service_ns per message it
    # takes in (0: a reply is part of service_ns). With service_ns = tx_ns
    # every message in or out costs the same (NetLR's Table 1 counts).
    tx_ns: Nanos = 0.0
    # each key of a multi-key request after the first (None: service_ns, a
    # key costs a whole request)
    per_key_ns: Nanos | None = None
    lognormal_sigma: Annotated[float, Field(gt=0.0, le=10.0)] = 0.5
    slow_fraction: Frac = 0.0
    slow_capacity: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    queue_limit: int = Field(0, ge=0, le=1 << 24)  # requests queued per server (0 = unbounded)
    # shared: one FIFO feeds every worker; by_key: keys are partitioned over
    # the workers (worker = mix64(keyhash) mod workers, one FIFO each), as with
    # per-core stores behind RSS, so one hot key can use only one core.
    dispatch: Literal["shared", "by_key"] = "shared"


class Topology(Strict):
    # rack: one switch. racks (simulator): a spine with the clients and
    # `racks` leaves of servers / racks servers each (docs/simulator.md)
    kind: Literal["rack", "racks"] = "rack"
    servers: int = Field(ge=1, le=MAX_TOTAL_SERVERS)
    racks: int = Field(1, ge=1, le=MAX_RACKS)
    clients: int = Field(ge=1, le=MAX_CLIENTS)
    link_latency_ns: Nanos = 1_000.0
    link_gbps: Gbps = 25.0
    switch_latency_ns: Nanos = 500.0
    server: ServerModel = ServerModel()
    # Bytes a frame carries besides the UDP payload: Ethernet 14 + IPv4 20 +
    # UDP 8 + FCS 4 + preamble/IFG 20 (what serialization delay is charged on).
    frame_overhead_bytes: int = Field(66, ge=0, le=65_535)
    recirc_gbps: Gbps = 100.0  # recirculation port bandwidth (0 = unlimited)
    cpu_queue: int = Field(4096, ge=1, le=1 << 20)  # switch -> controller packet channel
    client_cpu_ns: Nanos = 0.0  # client CPU cost per request (one core per client)
    # Finite rates (simulator; 0 = unlimited): packets a client sends per
    # second at most (its NIC / packet generator), and packets the switch
    # pipeline processes per second (Mpps); with link_gbps they bound what a
    # switch can serve (a NetCache hit), as on a testbed.
    client_max_rps: Annotated[float, Field(ge=0.0, le=1e10)] = 0.0
    switch_mpps: Annotated[float, Field(ge=0.0, le=1e5)] = 0.0
    # ... and per packet (simulator, digest NetMC 9.14): each packet sent costs
    # tx + key per key it carries; each reply received rx + pair per key it
    # answers (then replies wait for the client's core)
    client_tx_ns: Nanos = 0.0
    client_key_ns: Nanos = 0.0
    client_rx_ns: Nanos = 0.0
    client_pair_ns: Nanos = 0.0
    # cores per client host (simulator): the costs above run on the core
    # that frees first, a c-server FIFO (1: every cost queues on one core)
    client_cores: int = Field(1, ge=1, le=MAX_CLIENT_CORES)
    # client timeout and resends after it (same req_id); None = auto: off
    # without injected faults (the Pegasus artifact), on with loss or
    # duplication (netkv/retries.py); 0 = off
    timeout_us: Micros | None = None
    retries: int | None = Field(None, ge=0, le=100)
    # Measurement (simulator): stragglers may complete for drain_ms after the
    # last arrival; the timeline is cut into windows of timeline_ms.
    drain_ms: Millis = 50.0
    timeline_ms: Millis = 10.0
    # Hostile clients (docs/security.md): the last N of `clients` send the
    # protocol's adversarial traffic, each at hostile_rps, beside the
    # honest workload (spread over the other clients).
    hostile_clients: int = Field(0, ge=0, le=65_535)
    hostile_rps: Pos = 20_000.0

    @model_validator(mode="after")
    def _racks_divide_servers(self) -> "Topology":
        if self.kind == "rack" and self.servers > MAX_SERVERS:
            raise ValueError(f"servers = {self.servers} (allowed: 1..{MAX_SERVERS} on one rack; "
                             "more with topology.kind=racks)")
        if self.kind == "rack" and self.racks != 1:
            raise ValueError(f"topology.racks = {self.racks} (allowed: 1 with topology.kind=rack)")
        if self.kind == "racks":
            if self.racks < 2 or self.servers % self.racks:
                raise ValueError(f"topology.racks = {self.racks} for {self.servers} servers "
                                 f"(allowed: 2..{MAX_RACKS}, dividing the servers)")
            if self.servers // self.racks > MAX_SERVERS:
                raise ValueError(f"servers = {self.servers} in {self.racks} racks (allowed: at "
                                 f"most {MAX_SERVERS} servers per rack)")
        return self

    @model_validator(mode="after")
    def _hostile_fewer_than_clients(self) -> "Topology":
        if self.hostile_clients >= self.clients:
            raise ValueError(f"topology.hostile_clients = {self.hostile_clients} (allowed: "
                             f"0..{self.clients - 1}, fewer than clients: the rest run the "
                             "workload)")
        return self


class ServerCrash(Strict):
    server: int = Field(ge=0, lt=MAX_TOTAL_SERVERS)
    at_s: Annotated[float, Field(ge=0.0, le=MAX_DURATION_S)]
    restart_s: Annotated[float, Field(ge=0.0, le=MAX_DURATION_S)] | None = None  # None = stays down


class SwitchOutage(Strict):
    """The switch stops at at_s (every packet reaching it is lost) and
    restarts empty at restart_s; the controller installs its state again."""

    at_s: Annotated[float, Field(ge=0.0, le=MAX_DURATION_S)]
    restart_s: Annotated[float, Field(ge=0.0, le=MAX_DURATION_S)] | None = None  # None = stays down

    @model_validator(mode="after")
    def _restart_after_stop(self) -> "SwitchOutage":
        if self.restart_s is not None and self.restart_s < self.at_s:
            raise ValueError(f"target.faults.switch_outages: restart_s = {self.restart_s:g} "
                             f"(allowed: >= at_s = {self.at_s:g})")
        return self


class Faults(Strict):
    # Each applies to every traversal of the chosen links (a request and its
    # reply cross four: client up, server down, server up, client down).
    loss: Frac = 0.0
    duplicate: Frac = 0.0
    reorder: Frac = 0.0  # fraction of packets held back ...
    reorder_us: Micros = 10.0  # ... by a uniform extra delay in [0, reorder_us]
    delay_us: Micros = 0.0  # constant extra one-way delay per hop
    links: Literal["all", "clients", "servers"] = "all"
    crashes: list[ServerCrash] = []
    switch_outages: list[SwitchOutage] = []  # simulator, and mininet with netkv-switch


class Loop(Strict):
    """A rack's recirculation port (target=mininet): a veth pair whose two
    ends are both the switch's; what the switch sends into it comes back into
    its ingress. Its queue holds ``depth`` frames (more are dropped and
    counted, as by a port's egress queue) and it carries ``rate_pps`` frames/s
    (0 = as fast as the switch goes): the simulator's ``topology.recirc_gbps``
    at a software switch's speed."""

    rate_pps: Annotated[float, Field(ge=0.0, le=1e9)] = 20_000.0
    depth: int = Field(256, ge=1, le=65_536)


class Tofino(Strict):
    """target.switch=tofino (untested here: no SDE): where bf_switchd's
    P4Runtime server listens (its port on the switch host, forwarded here
    over SSH), the device id, the PCIe CPU port and the recirculation port
    the TNA programs are compiled for (CPU 64 on a 2-pipe Tofino 1, 320 on a
    4-pipe one), and the SDE's folder on the switch host."""

    grpc_addr: str = Field("127.0.0.1:9559", pattern=r"^[\w.\-]+:\d{1,5}$")
    device_id: int = Field(0, ge=0, le=2**32 - 1)
    cpu_port: int = Field(64, ge=0, le=511)
    recirc_port: int = Field(68, ge=0, le=511)   # a recirculation port (68: pipe 0, Tofino 1)
    # the SDE's folder on the switch host (run_switchd.sh, install/bin/bf-p4c);
    # unset: this machine's $SDE, the same path there
    sde: str | None = Field(None, pattern=r"^/")


class Target(Strict):
    name: Literal["sim", "mininet", "testbed"]
    description: str = ""
    # the switch back-end (netkv.backends): netkv = the C pipeline (in-process
    # on the simulator, netkv-switch on a rack); bmv2 = the P4 program;
    # tofino = the TNA program on a Tofino (testbed)
    switch: str = "netkv"
    faults: Faults = Faults()
    # target=mininet (real processes; ignored by the simulator)
    service_ns: Nanos = 0.0  # kvserver busy-wait per request: emulated capacity (0 = none)
    max_rps: Annotated[float, Field(gt=0.0, le=1e9)] = 50_000.0  # ceiling of the load search on this machine
    # auto: what the protocol asks for (its plug-in's ``preload``)
    preload: Literal["auto", "home", "all", "none"] = "auto"
    spin_us: Micros = 0.0  # netkv-switch busy-polls this long after traffic (0 = sleep at once)
    loop: Loop = Loop()  # mininet: the switch's recirculation port
    tofino: Tofino = Tofino()  # target.switch=tofino (docs/testbed.md "Tofino")
    start_delay_ms: Millis = 20.0  # clients start together this long after all are ready
    # servers' load reports (Pegasus `load_window_us`) cover this long; 0 = one
    # controller epoch (at Mininet's thousands of req/s a 1 ms window holds ~1)
    load_window_us: Micros = 0.0
    min_duration_s: Annotated[float, Field(ge=0.0, le=MAX_DURATION_S)] = 0.0  # mininet: a point lasts at least this long
    min_epoch_ms: Millis = 0.0  # mininet: the controller epoch is at least this long

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
    factor: Annotated[float, Field(gt=0.0, le=1e6)] = 5.0
    p99_us: Annotated[float, Field(gt=0.0, le=1e8)] | None = None
    min_completion: Frac = 0.99
    precision: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.02
    unloaded_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.05
    max_points: int = Field(24, ge=2, le=1000)
    # repeat=N: a load's repeats disagree when some meet the SLO and some do
    # not, or their tails differ by more than this fraction (docs/configuration.md
    # "Repeats")
    repeat_tolerance: Annotated[float, Field(gt=0.0, le=100.0)] = 0.5
    # targets with real packets: a point during which the hypervisor took
    # more than max_steal of the machine's CPU time is measured again, at
    # most steal_retries times (docs/results.md "host_steal")
    max_steal: Annotated[float, Field(gt=0.0, le=1.0)] = 0.05
    steal_retries: int = Field(2, ge=0, le=10)

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
    counts what it left out; once the run's capture folder holds
    max_total_mb, later points run without capture (docs/debugging.md)."""

    snaplen: int = Field(256, ge=64, le=65535)
    max_mb: Pos = 64.0
    max_packets: int = Field(1_000_000, ge=1)
    max_total_mb: Pos = 1024.0


# --- the whole run ---------------------------------------------------------


def check_out_dir(out: str) -> None:
    """``out`` must name a directory that exists or can be made: not a file,
    nothing below a file, and its nearest existing parent writable."""
    if not out.strip() or "\0" in out:
        raise ValueError(f"out = {out!r} (allowed: a directory path)")
    try:
        _check_out_dir(out)
    except OSError as exc:  # a name too long, a loop of links, ...
        raise ValueError(f"out = {out!r}: {exc.strerror or exc} (allowed: a directory path)"
                         ) from None


def _check_out_dir(out: str) -> None:
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ValueError(f"out = {out!r} is an existing file (allowed: a directory path)")
    parent = path
    while not parent.exists():
        if parent.parent == parent:
            break
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise ValueError(f"out = {out!r}: {str(parent)!r} is a file (allowed: a directory path)")
    if parent.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"out = {out!r}: {str(parent)!r} is not writable "
                         "(allowed: a directory path you can write)")



class RunConfig(Strict):
    # Top-level shortcuts come first so that their errors are reported under
    # the name the user typed (alpha, not workload.alpha).
    name: str = Field(min_length=1, max_length=200, pattern=NAME_PATTERN)
    alpha: Alpha
    write_ratio: Frac
    servers: int = Field(ge=1, le=MAX_TOTAL_SERVERS)
    clients: int = Field(ge=1, le=MAX_CLIENTS)
    seed: int = Field(ge=0, lt=1 << 63)
    duration: Annotated[float, Field(gt=0.0, le=MAX_DURATION_S)]
    keys: int = Field(ge=1, le=MAX_KEYS)
    repeat: int = Field(1, ge=1, le=100)   # independent load searches (median max, interval)
    record_history: bool = False
    capture: bool = False
    capture_limits: CaptureLimits = CaptureLimits()
    out: str | None = None
    protocol: Protocol
    target: Target
    workload: Workload
    topology: Topology
    slo: Slo
    inventory: Inventory = Inventory(name="none")

    @model_validator(mode="after")
    def _testbed_has_a_rack(self) -> "RunConfig":
        if self.target.name == "testbed":
            self.inventory.check_rack(self.topology.servers, self.topology.clients,
                                      self.protocol.coordinators()[0])
        return self

    @field_validator("out")
    @classmethod
    def _out_is_a_directory_to_be(cls, out: str | None) -> str | None:
        if out is not None:
            check_out_dir(out)
        return out

    def _largest_value(self, size: int, limit: int) -> int:
        """The largest value below `size` whose largest packet fits `limit` B:
        it need not grow with the value (a protocol whose client splits large
        writes into packets of a bounded size; none splits above 128 KiB)."""
        return next(v for v in range(min(size, 1 << 17), -1, -1)
                    if self.protocol.payload_bytes(self.workload.key_size, v) <= limit)

    @model_validator(mode="after")
    def _servers_within_protocol_limit(self) -> "RunConfig":
        limit = self.protocol.max_servers
        top = self.topology
        if top.kind == "racks" and max(top.racks, top.servers // top.racks) > limit:
            # every switch's pipeline sees its racks (the spine) or its servers (a leaf)
            raise ValueError(
                f"servers = {top.servers} in {top.racks} racks (allowed: at most {limit} racks "
                f"and {limit} servers per rack for protocol {self.protocol.name})")
        if top.kind == "rack" and top.servers > limit:
            raise ValueError(
                f"servers = {self.topology.servers} (allowed: 1..{limit} for protocol "
                f"{self.protocol.name})"
            )
        limit = MAX_UDP_PAYLOAD.get(self.target.name)
        size = self.workload.max_value_size()
        if limit is not None and self.protocol.payload_bytes(self.workload.key_size, size) > limit:
            fit = self._largest_value(size, limit)
            raise ValueError(
                f"workload.value_size = {size} (allowed: 0..{fit} on target {self.target.name} "
                f"with protocol {self.protocol.name} and key_size {self.workload.key_size}: "
                f"a request must fit one {limit} B UDP payload)")
        limit = HOST_DGRAM_PAYLOAD
        if (self.target.name in HOST_TARGETS and self.workload.write_ratio > 0
                and self.protocol.payload_bytes(self.workload.key_size, size) > limit):
            fit = self._largest_value(size, limit)
            raise ValueError(
                f"workload.value_size = {size} with write_ratio > 0 (allowed: 0..{fit} on "
                f"target {self.target.name} with protocol {self.protocol.name} and key_size "
                f"{self.workload.key_size}: kvclient sends each packet of a write as one "
                f"{limit} B UDP payload at most; larger values need write_ratio=0)")
        windows = (self.duration * 1e3 + self.topology.drain_ms) / self.topology.timeline_ms \
            if self.topology.timeline_ms > 0 else 0
        if windows > MAX_TIMELINE_WINDOWS:
            raise ValueError(
                f"topology.timeline_ms = {self.topology.timeline_ms:g} (allowed: at least "
                f"{(self.duration * 1e3 + self.topology.drain_ms) / MAX_TIMELINE_WINDOWS:.3g} "
                f"for duration {self.duration:g} s: at most {MAX_TIMELINE_WINDOWS:,} windows)")
        mget = self.workload.multiget
        if mget.enabled and not self.protocol.supports_multiget:
            raise ValueError(f"workload.multiget.mean = {mget.mean:g} (allowed: 1 with protocol "
                             f"{self.protocol.name}: it has no multiget requests)")
        if mget.enabled and self.slo.kind == "auto" and self.slo.reference != "self" and \
                not lookup(self.slo.reference).config.supports_multiget:
            able = [n for n in protocol_names() if lookup(n).config.supports_multiget]
            raise ValueError(f"slo.reference = '{self.slo.reference}' has no multiget requests "
                             f"(allowed with workload.multiget.mean = {mget.mean:g}: "
                             f"{', '.join(['self', *able])})")
        for crash in self.target.faults.crashes:
            if crash.server >= self.topology.servers:
                raise ValueError(f"target.faults.crashes: server = {crash.server} (allowed: "
                                 f"0..{self.topology.servers - 1})")
        return self
