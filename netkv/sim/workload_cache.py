"""Workloads shared by the targets of one process.

A Workload is read-only once built (the engine copies the rank table before
hot-key dynamics change it), but building one is O(keys): 2.4 s at 10 M keys.
A run builds it twice (the SLO reference rack and the measured rack), and a
figure's joblib workers run many cells with the same workload (same alpha,
seed, servers and placement, another protocol), so they keep the last few.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable

from netkv.config.schema import RunConfig
from netkv.sim.engine import Workload, value_classes

# keys held at most (16 B of rank table + 16 B of probability/alias per key):
# 40 M keys ~ 1.3 GB per process
MAX_KEYS = 40_000_000

_cache: OrderedDict[Hashable, Workload] = OrderedDict()


def workload_key(cfg: RunConfig) -> Hashable | None:
    """What a Workload is built from (``Workload.config_args``, the very
    arguments of from_config); None for traces (the file may change between
    runs)."""
    args = Workload.config_args(cfg)
    if args["kind"] == "trace":
        return None
    sizes, weights = value_classes(args.pop("value_size"))
    return (*sorted((k, v if isinstance(v, Hashable) else repr(v)) for k, v in args.items()),
            tuple(sizes), tuple(weights))


def shared_workload(cfg: RunConfig) -> Workload:
    """The Workload of cfg, built once per process while it stays among the
    most recent MAX_KEYS keys' worth (never close it: other targets share it)."""
    key = workload_key(cfg)
    if key is None:
        return Workload.from_config(cfg)
    wl = _cache.get(key)
    if wl is not None:
        _cache.move_to_end(key)
        return wl
    wl = Workload.from_config(cfg)
    _cache[key] = wl
    # an evicted workload is freed when its last target lets go of it
    # (ffi.gc), never closed here: a live target may still be using it
    while len(_cache) > 1 and sum(v.n_keys for v in _cache.values()) > MAX_KEYS:
        _cache.popitem(last=False)
    return wl


def clear() -> None:
    """Forget every cached workload (tests)."""
    _cache.clear()
