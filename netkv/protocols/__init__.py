"""The protocol registry: which protocols exist and where they run today.

A protocol is a name in ``conf/protocol/``; this table says which targets
implement it, so that ``run`` can refuse an unimplemented combination in one
line instead of failing half-way.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class ProtocolInfo:
    name: str
    summary: str
    targets: tuple[str, ...]  # targets on which it runs today

    def module(self) -> ModuleType:
        """netkv.protocols.<name>: pipeline_params(cfg), sim_controller_factory(cfg)."""
        return importlib.import_module(f"netkv.protocols.{self.name}")


REGISTRY: dict[str, ProtocolInfo] = {
    info.name: info
    for info in (
        ProtocolInfo("hash", "static consistent hashing (baseline)", ("sim", "mininet")),
        ProtocolInfo("pegasus", "Pegasus coherence directory (OSDI'20)", ("sim", "mininet")),
        ProtocolInfo("netcache", "NetCache switch cache (baseline)", ("sim",)),
    )
}


def implemented_on(target: str) -> list[str]:
    return sorted(name for name, info in REGISTRY.items() if target in info.targets)
