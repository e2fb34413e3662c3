"""The protocol plug-in: everything a target, a switch back-end or the runner
may ask of a protocol, so that none of them ever names one.

Each protocol's module (``netkv/protocols/<name>.py``) defines ``PLUGIN``, a
``ProtocolPlugin``; the registry (``netkv/protocols/__init__.py``) lists the
modules, one line each. ``docs/adding-a-protocol.md`` lists the rest of a
protocol's files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from netkv.config.base import ProtocolBase
from netkv.wire.codec import Proto

if TYPE_CHECKING:
    from netkv.config.schema import RunConfig

Params = Mapping[str, str]
"""The ``key=value;...`` knobs the C pipeline and host logic read at init,
parsed (``parse_params``): what P4 defines and registers are derived from."""


def parse_params(text: str) -> dict[str, str]:
    """``"a=1;b=x"`` -> ``{"a": "1", "b": "x"}`` (the C side's nk_params)."""
    out: dict[str, str] = {}
    for item in text.split(";"):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def param_str(params: Params | None, key: str, default: str) -> str:
    if not params or params.get(key) in (None, ""):
        return default
    return str(params[key])


def param_int(params: Params | None, key: str, default: int) -> int:
    """An integer knob as the C side reads it (``true``/``false`` are 1/0)."""
    if not params or params.get(key) in (None, ""):
        return default
    value: Any = params[key]
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "false"):
            return int(low == "true")
        return int(low, 0)
    return int(value)


class RegisterCells(Protocol):
    """What a P4 back-end offers ``P4Semantics`` (BMv2: the Thrift CLI)."""

    def write(self, cells: Iterable[tuple[str, int, int]]) -> None: ...
    def reset(self, names: Sequence[str]) -> None: ...
    def resolve(self, name: str, index: int) -> tuple[str, int]: ...


class P4Semantics:
    """Register and table semantics the C pipeline has and a P4 target must
    emulate from the control plane (none by default). One object per driver:
    it may remember what it installed."""

    #: registers whose write is a control action, handed to ``reg_write``
    special_registers: frozenset[str] = frozenset()

    def reg_write(self, regs: RegisterCells, name: str, index: int, value: int) -> None:
        """A write to one of ``special_registers``."""
        raise NotImplementedError(name)

    def before_table_add(self, regs: RegisterCells, table: str, key: Sequence[int],
                         args: Sequence[int]) -> None:
        """Called before an entry is inserted (or modified)."""

    def after_table_delete(self, regs: RegisterCells, table: str, key: Sequence[int]) -> None:
        """Called after an entry is deleted."""


def _no_defines(params: Params) -> dict[str, int]:
    del params
    return {}


def servers_register(n_servers: int, params: Params) -> list[tuple[str, int, int]]:
    """What every pipeline's init sets: ``n_servers`` (ports 0..n-1 are the
    servers', trusted for server-only messages; docs/security.md)."""
    return [("n_servers", 0, param_int(params, "n_servers", n_servers))]


@dataclass(frozen=True)
class P4Program:
    """A protocol's P4 program, as a P4 back-end needs it."""

    source: str  # path under p4src/
    #: compile-time ``-D`` constants from the pipeline's params; ValueError
    #: (one line) for a value the P4 program cannot take
    defines: Callable[[Params], dict[str, int]] = _no_defines
    #: register cells the C pipeline's init sets to non-zero: (name, index, value)
    initial_registers: Callable[[int, Params], list[tuple[str, int, int]]] = servers_register
    semantics: Callable[[], P4Semantics] = P4Semantics
    #: the program's recirculation port is a loopback veth pair on the switch
    #: (StarCache's loop): the data ports (out, in) the program gives its two
    #: ends; None: no loop. A back-end without a loop pair cannot run it
    loop_ports: tuple[int, int] | None = None

    @property
    def needs_loop(self) -> bool:
        return self.loop_ports is not None


ControllerFactory = Callable[..., Any]


def _no_controller(cfg: "RunConfig") -> None:
    del cfg
    return None


def _no_params(cfg: "RunConfig") -> str:
    del cfg
    return ""


def _no_dead_knobs(cfg: "RunConfig") -> set[str]:
    del cfg
    return set()


def _no_caveats(cfg: "RunConfig") -> list[str]:
    del cfg
    return []


@dataclass(frozen=True)
class ProtocolPlugin:
    """One protocol, as the rest of netkv sees it."""

    name: str                        # = conf/protocol/<name>.yaml, the C registries' name
    summary: str                     # one line for ``netkv list``
    targets: tuple[str, ...]         # placements it runs on today
    config: type[ProtocolBase]       # its pydantic model (``name: Literal[<name>]``)
    wire: Proto                      # its wire format (netkv.wire.codec)
    udp_port: int                    # the UDP port its hosts use (the C ops' udp_port)
    #: which servers hold a key when a Mininet/testbed rack preloads them:
    #: its home only, or every server (replicas may be read anywhere)
    preload: Literal["home", "all"] = "home"
    #: the ``key=value;...`` params of its C pipeline and host logic
    pipeline_params: Callable[["RunConfig"], str] = _no_params
    #: ``factory(cfg) -> (engine -> epochs) | None`` for target=sim
    sim_controller: ControllerFactory = _no_controller
    #: ``factory(cfg) -> (plane -> Controller) | None`` for real racks
    rack_controller: ControllerFactory = _no_controller
    p4: P4Program | None = None
    #: config keys (``protocol.x``) with no effect on this run, so that a
    #: check comparing runs that differ only in them is flagged
    dead_knobs: Callable[["RunConfig"], set[str]] = _no_dead_knobs
    #: what its switch refuses at the trust boundary (docs/security.md), read
    #: into the dataset after every point: reason -> (register, index)
    refusals: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    #: what a run of this config does not guarantee though the protocol's
    #: name suggests it (a baseline run without its consistency): one line
    #: each, printed by the run and kept in its provenance.json ("caveats")
    caveats: Callable[["RunConfig"], list[str]] = _no_caveats
    #: which of the protocol's schemes this run is when it is not the
    #: protocol itself (a baseline sharing its code: "harmonia", "climc"),
    #: so the summary does not label a baseline's numbers with its name
    variant: Callable[["RunConfig"], str] = _no_params
