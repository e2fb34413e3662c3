"""The protocol registry: which protocols exist and where they run today.

A protocol is a name in ``conf/protocol/``; this table says which targets
implement it, so that ``run`` can refuse an unimplemented combination in one
line instead of failing half-way.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProtocolInfo:
    name: str
    summary: str
    targets: tuple[str, ...]  # targets on which it runs today


REGISTRY: dict[str, ProtocolInfo] = {
    info.name: info
    for info in (
        ProtocolInfo("hash", "static consistent hashing (baseline)", ("sim",)),
        ProtocolInfo("pegasus", "Pegasus coherence directory (OSDI'20)", ()),
        ProtocolInfo("netcache", "NetCache switch cache (baseline)", ()),
    )
}


def implemented_on(target: str) -> list[str]:
    return sorted(name for name, info in REGISTRY.items() if target in info.targets)
