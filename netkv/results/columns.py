"""The config as columns: every knob of a run, flattened to ``group.key`` names.

Every row of ``points.parquet`` carries the resolved value of every config
key that can differ between runs, so a reader can ``group_by`` the parquet
and get a figure's series back (docs/results.md "Config columns").
"""

from __future__ import annotations

import json
from typing import Any

from netkv.config.core import SHORTCUTS as SHORTCUT_KEYS
from netkv.config.core import flatten
from netkv.config.schema import RunConfig

__all__ = ["SHORTCUTS", "NOT_KNOBS", "flatten", "knob_columns"]

# Top-level shortcuts are interpolated into their groups (alpha ->
# workload.alpha): the group's value is the one that ran, so only it is a
# column. ``out`` is where a run went, not what ran (``load`` adds ``run``).
SHORTCUTS = frozenset(SHORTCUT_KEYS)
NOT_KNOBS = frozenset({"out"})


def knob_columns(cfg: RunConfig) -> dict[str, Any]:
    """``group.key`` -> resolved value for every knob of ``cfg``: scalars as
    they are, lists (a value-size mix, crash schedules) as JSON text so that
    each column keeps one scalar type."""
    out: dict[str, Any] = {}
    for key, value in flatten(cfg.model_dump(mode="json")).items():
        if key in SHORTCUTS or key in NOT_KNOBS or key.endswith(".description"):
            continue
        out[key] = json.dumps(value, sort_keys=True) if isinstance(value, list) else value
    return out


def config_columns(cfg: RunConfig) -> dict[str, Any]:
    """The columns every row of a run carries: short names for the keys a
    reader filters on most (``protocol``, ``alpha``, ...), then every knob."""
    value_size = cfg.workload.value_size
    return {
        "name": cfg.name,
        "protocol": cfg.protocol.name,
        "target": cfg.target.name,
        "workload": cfg.workload.kind,
        "alpha": cfg.workload.alpha,
        "write_ratio": cfg.workload.write_ratio,
        "keys": cfg.workload.keys,
        "value_size": value_size if isinstance(value_size, int) else -1,
        "servers": cfg.topology.servers,
        "clients": cfg.topology.clients,
        "seed": cfg.seed,
        "min_completion": cfg.slo.min_completion,
        # multiget sizes: the mean asked for and the power law's solved exponent
        "multiget_mean": cfg.workload.multiget.mean,
        "multiget_exponent": (cfg.workload.multiget.exponent
                              if cfg.workload.multiget.exponent is not None else float("nan")),
        **knob_columns(cfg),
    }


def varying(rows: list[dict[str, Any]]) -> list[str]:
    """The columns whose values are not all equal over ``rows`` (in the
    first row's order)."""
    if not rows:
        return []
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return [k for k in keys if len({json.dumps(r.get(k), sort_keys=True) for r in rows}) > 1]
