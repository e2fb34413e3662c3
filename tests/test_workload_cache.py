"""netkv/sim/workload_cache.py: targets of one process share a Workload only
when every input of Workload.from_config agrees, and a shared one is
read-only and stays alive while a target holds it."""

from __future__ import annotations

import numpy as np
import pytest

from netkv.config.compose import load
from netkv.native import NativeBuildMissing, library_path

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover - depends on the build
    pytest.skip(f"libnetkv not built: {exc}", allow_module_level=True)

from netkv.sim import workload_cache
from netkv.sim.engine import Workload
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


@pytest.fixture(autouse=True)
def fresh_cache():
    workload_cache.clear()
    yield
    workload_cache.clear()


def same_table(a: Workload, b: Workload) -> bool:
    return bool(np.array_equal(a.rank_info(), b.rank_info()))


def test_same_config_shares_one_workload_across_protocols() -> None:
    a = workload_cache.shared_workload(load(["protocol=hash", *BASE]))
    b = workload_cache.shared_workload(load(["protocol=starcache", *BASE]))
    assert a is b
    with Workload.from_config(load(["protocol=hash", *BASE])) as fresh:
        assert same_table(a, fresh)


@pytest.mark.parametrize("change", VARIANTS, ids=lambda c: c[0])
def test_any_changed_input_builds_its_own(change: list[str]) -> None:
    base = workload_cache.shared_workload(load(["protocol=hash", *BASE]))
    cfg = load(["protocol=hash", *BASE, *change])
    other = workload_cache.shared_workload(cfg)
    assert other is not base
    with Workload.from_config(cfg) as fresh:
        assert same_table(other, fresh)


def test_shared_rank_table_is_read_only() -> None:
    info = workload_cache.shared_workload(load(["protocol=hash", *BASE])).rank_info()
    with pytest.raises(ValueError):
        info["home"][0] = 1


def test_eviction_keeps_a_held_workload_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workload_cache, "MAX_KEYS", 20000)
    cfg = load(["protocol=hash", *BASE])
    with SimTarget(cfg) as t:
        before = t.workload.rank_info().copy()
        workload_cache.shared_workload(load(["protocol=hash", *BASE, "alpha=0.9"]))
        assert workload_key_count() == 1  # the first one was evicted...
        assert t.workload.ptr is not None  # ...but not freed under the target
        assert np.array_equal(t.workload.rank_info(), before)
    # evicted: the next target builds it again
    assert workload_cache.shared_workload(cfg) is not t.workload


def workload_key_count() -> int:
    return len(workload_cache._cache)


def test_netcache_value_size_oracle_matches_the_rank_table() -> None:
    """The oracle's uint32 search (a Python int needle cast all keyhashes,
    19 ms a call at 10 M keys) finds every key's size, and 0 for unknown."""
    from netkv.protocols.netcache import value_size_oracle
    cfg = load(["protocol=netcache", *BASE,
                "workload.value_size=[{size:64,weight:12},{size:1024,weight:88}]"])
    wl = workload_cache.shared_workload(cfg)
    info = wl.rank_info()
    size_of = value_size_oracle(wl)
    for rec in info[::997]:
        assert size_of(int(rec["keyhash"])) == int(rec["value_len"])
    known = set(int(h) for h in info["keyhash"])
    absent = next(h for h in range(1, 1000) if h not in known)
    assert size_of(absent) == 0
    assert size_of(-1) == 0 and size_of(1 << 32) == 0
