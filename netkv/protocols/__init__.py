"""The protocol registry: one line per protocol, naming the module that
holds its plug-in (``PLUGIN``, a ``netkv.protocols.plugin.ProtocolPlugin``).

Everything else asks the plug-in: the config schema builds its protocol union
from ``config_models()``, targets and switch back-ends ask for ports, preload
placement, controllers and P4 programs, and ``run`` refuses a combination the
plug-in does not list (one line) instead of failing half-way.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from netkv.config.base import ProtocolBase
    from netkv.protocols.plugin import ProtocolPlugin

#: protocol name -> module defining PLUGIN
PROTOCOLS: dict[str, str] = {
    "hash": "netkv.protocols.hash",
    "pegasus": "netkv.protocols.pegasus",
    "netcache": "netkv.protocols.netcache",
    "kvswitch": "netkv.protocols.kvswitch",
    "starcache": "netkv.protocols.starcache",
    "netmc": "netkv.protocols.netmc",
    "netlr": "netkv.protocols.netlr",
}


def names() -> list[str]:
    return list(PROTOCOLS)


def lookup(name: str) -> "ProtocolPlugin":
    """The plug-in of protocol ``name``; KeyError for an unknown one."""
    module = importlib.import_module(PROTOCOLS[name])
    found: ProtocolPlugin = module.PLUGIN
    if found.name != name:
        raise RuntimeError(f"{PROTOCOLS[name]}.PLUGIN is named {found.name!r}, not {name!r}")
    return found


def plugins() -> list["ProtocolPlugin"]:
    return [lookup(n) for n in PROTOCOLS]


def config_models() -> tuple[type["ProtocolBase"], ...]:
    return tuple(p.config for p in plugins())


def implemented_on(target: str) -> list[str]:
    return sorted(p.name for p in plugins() if target in p.targets)
