"""Switch back-ends: what runs the switch of a rack, behind one life cycle
(``netkv.backends.base.SwitchBackend``): prepare (refuse in one line, compile
cached), start on a node, hand back a ``SwitchDriver``, stop.

One line per back-end: its name (``target.switch``), its class, the
placements it runs on, and the programs it starts (for ``netkv clean``).
On the simulator the switch is the C pipeline in-process, which is the
``netkv`` back-end's pipeline.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from netkv.backends.base import SwitchBackend


@dataclass(frozen=True)
class BackendEntry:
    cls: str                       # "module:Class"
    placements: tuple[str, ...]    # target names it runs on
    programs: tuple[str, ...]      # process names it starts


BACKENDS: dict[str, BackendEntry] = {
    "netkv": BackendEntry("netkv.backends.netkv_switch:NetkvSwitchBackend",
                          ("sim", "mininet", "testbed"), ("netkv-switch",)),
    # a source build's simple_switch_grpc is a libtool wrapper that execs
    # .libs/lt-simple_switch_grpc (same pid, new name): both count
    "bmv2": BackendEntry("netkv.backends.bmv2:Bmv2Backend", ("mininet", "testbed"),
                         ("simple_switch_grpc", "lt-simple_switch_grpc")),
    # untested: no Tofino SDE here (docs/testbed.md "Tofino")
    "tofino": BackendEntry("netkv.backends.tofino:TofinoBackend", ("testbed",),
                           ("run_switchd.sh", "bf_switchd")),
}


def available_on(placement: str) -> list[str]:
    return [name for name, e in BACKENDS.items() if placement in e.placements]


def backend_class(name: str) -> type["SwitchBackend"]:
    module, _, cls = BACKENDS[name].cls.partition(":")
    found: type[SwitchBackend] = getattr(importlib.import_module(module), cls)
    return found


def programs() -> tuple[str, ...]:
    return tuple(p for e in BACKENDS.values() for p in e.programs)
