"""What every command needs without Hydra or pydantic (``--help`` and
``list`` stay fast): the config error, the exit codes, where ``conf/`` is
and its groups."""

from __future__ import annotations

import os
from pathlib import Path


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
