"""netkv/sim/workload_cache.py: a WorkloadCache hands out one Workload per
set of Workload.from_config inputs (in memory, and through a figure's folder
of tables to every process sharing it), equal to a fresh build; a shared one
is read-only and stays alive while a target holds it; a figure's folder is
its own and is removed when the figure ends, interrupted or not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from netkv.config.compose import load
from netkv.native import NativeBuildMissing, library_path

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover - depends on the build
    pytest.skip(f"libnetkv not built: {exc}", allow_module_level=True)

from netkv.sim.engine import SimError, Workload
from netkv.sim.workload_cache import WorkloadCache, figure_folder
from netkv.targets.sim import SimTarget

BASE = ["servers=8", "keys=20000", "seed=3", "alpha=0.99"]

# each changes one input of Workload.from_config
VARIANTS = [
    ["alpha=0.9"],
    ["seed=4"],
    ["servers=9"],
    ["keys=20001"],
    ["workload.key_size=16"],
    ["workload=uniform"],
    ["protocol.virtual_nodes=4"],
    ["protocol.ring=equal_ranges"],
    ["workload.value_size=256"],
    ["workload.value_size=[{size:64,weight:12},{size:1024,weight:88}]"],
    ["workload.value_size=[{size:64,weight:50},{size:1024,weight:50}]"],
]



def same_tables(a: Workload, b: Workload) -> bool:
    alias_a, alias_b = a.alias_table(), b.alias_table()
    same_alias = (alias_a is None and alias_b is None) or (
        alias_a is not None and alias_b is not None and np.array_equal(alias_a, alias_b))
    return bool(np.array_equal(a.rank_info(), b.rank_info())) and same_alias


@pytest.fixture(params=["memory", "folder"])
def make_cache(request, tmp_path):
    """A cache of its own, or (folder) one reading tables another process of
    the figure wrote: each call is a fresh cache on the same folder."""
    if request.param == "memory":
        shared = WorkloadCache()
        return lambda: shared
    return lambda: WorkloadCache(tmp_path)


def test_same_config_shares_one_workload_across_protocols() -> None:
    cache = WorkloadCache()
    a = cache.get(load(["protocol=hash", *BASE]))
    b = cache.get(load(["protocol=starcache", *BASE]))
    assert a is b and cache.built == 1
    with Workload.from_config(load(["protocol=hash", *BASE])) as fresh:
        assert same_tables(a, fresh)


@pytest.mark.parametrize("workload", [[], ["workload=uniform"]], ids=["zipf", "uniform"])
def test_a_second_process_reads_the_tables_and_gets_a_fresh_builds_workload(
        tmp_path: Path, workload: list[str]) -> None:
    cfg = load(["protocol=hash", *BASE, *workload])
    first, second = WorkloadCache(tmp_path), WorkloadCache(tmp_path)
    built = first.get(cfg)
    read = second.get(cfg)
    assert (first.built, first.loaded, second.built, second.loaded) == (1, 0, 0, 1)
    with Workload.from_config(cfg) as fresh:
        assert same_tables(built, fresh) and same_tables(read, fresh)
    assert (read.alias_table() is None) == (workload != [])


@pytest.mark.parametrize("change", VARIANTS, ids=lambda c: c[0])
def test_any_changed_input_builds_its_own(make_cache, change: list[str]) -> None:
    base = make_cache().get(load(["protocol=hash", *BASE]))
    cfg = load(["protocol=hash", *BASE, *change])
    cache = make_cache()
    before = cache.built
    other = cache.get(cfg)
    assert other is not base and cache.built == before + 1
    with Workload.from_config(cfg) as fresh:
        assert same_tables(other, fresh)
        assert not same_tables(base, fresh)


def test_uniform_shares_one_table_whatever_alpha_says(make_cache) -> None:
    """Workload samples uniform (and zipf 0) whatever alpha: one table, so
    the SLO reference (uniform, alpha 0) shares its uniform cells'."""
    a = make_cache().get(load(["protocol=hash", *BASE, "workload=uniform", "alpha=0.9"]))
    cache = make_cache()
    before = cache.built
    b = cache.get(load(["protocol=hash", *BASE, "alpha=0"]))
    assert cache.built == before and same_tables(a, b)


def test_tables_of_the_wrong_size_are_refused() -> None:
    cfg = load(["protocol=hash", *BASE])
    with Workload.from_config(cfg) as wl:
        ranks, alias = wl.rank_info(), wl.alias_table()
        args = Workload.config_args(cfg)
        with pytest.raises(SimError, match="ranks for"):
            Workload(**args, tables=(ranks[:-1], alias))
        with pytest.raises(SimError, match="missing alias"):
            Workload(**args, tables=(ranks, None))


def test_shared_rank_table_is_read_only() -> None:
    info = WorkloadCache().get(load(["protocol=hash", *BASE])).rank_info()
    with pytest.raises(ValueError):
        info["home"][0] = 1


def test_eviction_keeps_a_held_workload_alive() -> None:
    cache = WorkloadCache(max_keys=20000)
    cfg = load(["protocol=hash", *BASE])
    with SimTarget(cfg, workloads=cache) as t:
        before = t.workload.rank_info().copy()
        cache.get(load(["protocol=hash", *BASE, "alpha=0.9"]))
        assert len(cache) == 1  # the first one was evicted...
        assert t.workload.ptr is not None  # ...but not freed under the target
        assert np.array_equal(t.workload.rank_info(), before)
    # evicted: the next target builds it again
    assert cache.get(cfg) is not t.workload


def test_a_figure_folder_is_its_own_and_removed_at_the_end(tmp_path: Path) -> None:
    with figure_folder(tmp_path) as one, figure_folder(tmp_path) as two:
        assert one != two   # two figures (or one twice) at once never share
        WorkloadCache(one).get(load(["protocol=hash", *BASE]))
        assert list(one.glob("*.ranks.npy")) and not list(two.glob("*.npy"))
    assert not one.exists() and not two.exists()


def test_an_interrupted_figure_removes_its_folder(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        with figure_folder(tmp_path) as folder:
            WorkloadCache(folder).get(load(["protocol=hash", *BASE]))
            raise KeyboardInterrupt
    assert not folder.exists()


def test_a_killed_figures_folder_is_swept_by_its_dead_owner(tmp_path: Path) -> None:
    """SIGKILL leaves a figure's folder (nothing runs its cleanup); the next
    figure in the same parent, or `netkv clean` over a runs tree, removes
    it. A live owner's folder stays, so does one being made (no owner line
    yet) until it is a minute old; a reused pid (another start time) is not
    the owner."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from netkv.sim.workload_cache import OWNER, owner_alive, sweep_dead

    runs = tmp_path / "runs"
    nested = runs / "reproduce" / "fig" / "stamp"
    nested.mkdir(parents=True)
    code = ("import sys, time; from pathlib import Path; "
            "from netkv.sim.workload_cache import figure_folder\n"
            "with figure_folder(Path(sys.argv[1])) as f:\n"
            "    print(f, flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(nested)], stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None
    dead = Path(child.stdout.readline().strip())
    assert owner_alive(dead) and sweep_dead(runs, recursive=True) == []   # still running
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert dead.is_dir() and not owner_alive(dead)
    reused = nested / ".workloads-reused"
    reused.mkdir()
    (reused / OWNER).write_text(f"{os.getpid()} 1\n")         # our pid, not our start
    fresh, stale = nested / ".workloads-fresh", nested / ".workloads-stale"
    fresh.mkdir()
    stale.mkdir()
    os.utime(stale, (time.time() - 120, time.time() - 120))
    assert sweep_dead(runs) == []      # not recursive: runs' own folders only
    assert sweep_dead(runs, recursive=True) == sorted([dead, reused, stale])   # netkv clean
    assert fresh.is_dir() and not dead.exists()
    # a figure resumed into the same folder sweeps it first
    stale.mkdir()
    os.utime(stale, (time.time() - 120, time.time() - 120))
    with figure_folder(nested) as mine:
        assert mine.is_dir() and fresh.is_dir() and not stale.exists()


def test_netcache_value_size_oracle_matches_the_rank_table() -> None:
    """The oracle's uint32 search (a Python int needle cast all keyhashes,
    19 ms a call at 10 M keys) finds every key's size, and 0 for unknown."""
    from netkv.protocols.netcache import value_size_oracle
    cfg = load(["protocol=netcache", *BASE,
                "workload.value_size=[{size:64,weight:12},{size:1024,weight:88}]"])
    wl = WorkloadCache().get(cfg)
    info = wl.rank_info()
    size_of = value_size_oracle(wl)
    for rec in info[::997]:
        assert size_of(int(rec["keyhash"])) == int(rec["value_len"])
    known = set(int(h) for h in info["keyhash"])
    absent = next(h for h in range(1, 1000) if h not in known)
    assert size_of(absent) == 0
    assert size_of(-1) == 0 and size_of(1 << 32) == 0
