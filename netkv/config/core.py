"""What every command needs without Hydra or pydantic (``--help`` and
``list`` stay fast): the config error, the exit codes, where ``conf/`` is
and its groups."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


# a bad config or command-line option: one line saying what is allowed
EXIT_CONFIG = 2
# a command interrupted by Ctrl-C (or SIGTERM, which netkv turns into one):
# 128 + SIGINT, as a shell reports it
EXIT_INTERRUPTED = 130


class ConfigError(ValueError):
    """A config that cannot run; ``str()`` is the one line to print."""


def conf_dir() -> Path:
    """The ``conf/`` folder: $NETKV_CONF_DIR, else the checkout's ``conf/``."""
    override = os.environ.get("NETKV_CONF_DIR")
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().parents[2] / "conf"


CONFIG_NAME = "config"
GROUPS = ("protocol", "target", "workload", "topology", "slo", "inventory")


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


# root shortcuts and the group keys made of them (conf/config.yaml): a run
# reads the group's, which the command line may set apart from the shortcut
SHORTCUTS = {"servers": "topology.servers", "clients": "topology.clients",
             "write_ratio": "workload.write_ratio", "alpha": "workload.alpha",
             "keys": "workload.keys"}


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level of dotted keys (lists stay values)."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): data}
