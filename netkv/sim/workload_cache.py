"""Workloads built once and shared: by the racks of a run, and through
files by every process of a figure.

A Workload is read-only once built (the engine copies the rank table before
hot-key dynamics change it), but building one is O(keys): 2.4 s at 10 M keys.
A run builds it twice (the SLO reference rack and the measured rack), and a
figure's joblib workers run many cells with the same workload (same alpha,
seed, servers and placement, another protocol).

A ``WorkloadCache`` is owned by whoever runs (a run, a figure's cell) and
handed to its targets; no module state. It keeps the last few Workloads it
handed out and, given a ``folder`` (``figure_folder``: one per figure run,
removed when the figure ends), writes each zipf/uniform workload's rank and
alias tables there as .npy files the first time any process of the figure
builds it; the others copy them in (``Workload(tables=...)``, ~0.2 s at
10 M keys) instead of building. A file lock per workload makes the
figure's processes build each one once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from netkv import procstat
from netkv.config.schema import RunConfig
from netkv.sim.engine import Workload, value_classes

# keys held at most (16 B of rank table + 16 B of probability/alias per key):
# 40 M keys ~ 1.3 GB per process
MAX_KEYS = 40_000_000


def workload_key(cfg: RunConfig) -> Hashable | None:
    """What a Workload is built from (``Workload.config_args``, the very
    arguments of from_config); None for traces (the file may change between
    runs)."""
    args = Workload.config_args(cfg)
    if args["kind"] == "trace":
        return None
    if args["kind"] == "uniform" or (args["kind"] == "zipf" and args["alpha"] == 0.0):
        # one distribution, whatever alpha says (Workload samples zipf 0 as
        # uniform): a figure's SLO reference shares its uniform cells' table
        args.update(kind="uniform", alpha=0.0)
    sizes, weights = value_classes(args.pop("value_size"))
    return (*sorted((k, v if isinstance(v, Hashable) else repr(v)) for k, v in args.items()),
            tuple(sizes), tuple(weights))


def _file_stem(key: Hashable) -> str:
    # repr of a tuple of str/int/float/tuple: stable across processes
    return hashlib.blake2b(repr(key).encode(), digest_size=12).hexdigest()


class WorkloadCache:
    """The Workloads of one owner, built once; with ``folder``, once for
    every process sharing that folder. Never close a Workload it handed
    out: other targets may share it (each is freed with its last holder)."""

    def __init__(self, folder: Path | str | None = None, max_keys: int = MAX_KEYS) -> None:
        self.folder = Path(folder) if folder is not None else None
        self.max_keys = max_keys
        self._held: OrderedDict[Hashable, Workload] = OrderedDict()
        self.built = 0     # built here (not read from the folder)
        self.loaded = 0    # copied in from the folder's tables

    def get(self, cfg: RunConfig) -> Workload:
        key = workload_key(cfg)
        if key is None:
            return Workload.from_config(cfg)
        wl = self._held.get(key)
        if wl is not None:
            self._held.move_to_end(key)
            return wl
        wl = self._from_folder(cfg, key) if self.folder is not None else self._build(cfg)
        self._held[key] = wl
        # an evicted workload is freed when its last target lets go of it
        # (ffi.gc), never closed here: a live target may still be using it
        while len(self._held) > 1 and sum(v.n_keys for v in self._held.values()) > self.max_keys:
            self._held.popitem(last=False)
        return wl

    def __len__(self) -> int:
        return len(self._held)

    def _build(self, cfg: RunConfig) -> Workload:
        self.built += 1
        return Workload.from_config(cfg)

    def _from_folder(self, cfg: RunConfig, key: Hashable) -> Workload:
        assert self.folder is not None
        stem = self.folder / _file_stem(key)
        ranks_file, alias_file = stem.with_suffix(".ranks.npy"), stem.with_suffix(".alias.npy")
        with open(stem.with_suffix(".lock"), "w") as lock:
            # the first process to want it builds it; the others wait, then read
            fcntl.flock(lock, fcntl.LOCK_EX)
            if ranks_file.exists():
                ranks = np.load(ranks_file, mmap_mode="r")
                alias = np.load(alias_file, mmap_mode="r") if alias_file.exists() else None
                self.loaded += 1
                return Workload(**Workload.config_args(cfg), tables=(ranks, alias))
            wl = self._build(cfg)
            table = wl.alias_table()
            if table is not None:
                _save(alias_file, table)
            _save(ranks_file, wl.rank_info())   # last: its presence marks a complete set
            return wl


def _save(path: Path, array: np.ndarray) -> None:
    """Write-then-rename: a reader never sees half a table."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.save(f, array)
    os.replace(tmp, path)


PREFIX = ".workloads-"
OWNER = "owner"          # "<pid> <start time in clock ticks>" of the figure's process
# a folder without its owner line yet is one being made; one this old is not
UNOWNED_GRACE_S = 60.0


def owner_alive(folder: Path) -> bool:
    """Whether the process that made figure folder ``folder`` still runs."""
    try:
        return procstat.owner_running((folder / OWNER).read_text())
    except FileNotFoundError:
        try:
            return time.time() - folder.stat().st_mtime < UNOWNED_GRACE_S
        except OSError:
            return False
    except (OSError, ValueError):
        return False


def sweep_dead(root: Path, recursive: bool = False) -> list[Path]:
    """Remove the figure folders under ``root`` whose process is gone: a
    figure killed with SIGKILL (or a lost machine) cannot remove its own
    (Ctrl-C and SIGTERM do). ``recursive``: at any depth (``netkv clean``
    over a runs tree), else ``root``'s own. The removed folders."""
    if not root.is_dir():
        return []
    found = root.rglob(PREFIX + "*") if recursive else root.glob(PREFIX + "*")
    removed = []
    for folder in sorted(f for f in found if f.is_dir()):
        if not owner_alive(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@contextmanager
def figure_folder(parent: Path) -> Iterator[Path]:
    """A folder of shared workload tables for one figure run, under
    ``parent``, unique to this run (two figures, or the same one twice, never
    share one) and removed when the figure ends, interrupted or not. Dead
    figures' folders in ``parent`` (a resumed ``--out``) go first."""
    parent.mkdir(parents=True, exist_ok=True)
    sweep_dead(parent)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
    try:
        (folder / OWNER).write_text(procstat.owner_record() + "\n")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
