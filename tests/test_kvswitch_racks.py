"""Fig. 7f's two-level KVSwitch in the fluid model
(netkv/protocols/kvswitch_racks.py, docs/kvswitch.md "Fig. 7f"): the
partition is the simulator's, the plans are the controller's rules, load is
conserved, and each level does what the paper says it does."""

from __future__ import annotations

import numpy as np
import pytest

from netkv.native import NativeBuildMissing, library_path
from netkv.protocols import kvswitch_plan as ks
from netkv.protocols import kvswitch_racks as kr

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover
    pytest.skip(str(exc), allow_module_level=True)


def test_owners_are_the_simulators_equal_ranges() -> None:
    from netkv.config.compose import load
    from netkv.sim.engine import Workload

    cfg = load(["protocol=kvswitch", "servers=32", "keys=20000", "alpha=0.99"])
    with Workload.from_config(cfg) as wl:
        info = wl.rank_info()
    assert (kr.owners_equal_ranges(info["keyhash"], 32) == info["home"]).all()


def test_fluid_loads_is_the_placement_key_by_key() -> None:
    rng = np.random.default_rng(1)
    shares, owners = rng.random(300), rng.integers(0, 32, 300)
    rs = rng.integers(1, 33, 300)
    want = np.zeros(32)
    for s, o, r in zip(shares, owners, rs):
        for srv in ks.placement(int(o), int(r), 32):
            want[srv] += s / r
    assert ks.fluid_loads(shares, owners, rs, 32, np.zeros(32)) == pytest.approx(want)


def test_one_hot_key_needs_both_levels() -> None:
    """2 racks x 2 servers, one key with half the load on server 0, the rest
    even (0.125 a server). The spine splits it over both racks, at index 0
    in each; each leaf then splits its half over its two servers."""
    shares, owner = np.array([0.5]), np.array([0])
    plan = kr.plan_racks(shares, owner, 2, 2, k=10, epsilon=0.05, gamma=0.8)
    assert plan.loads == pytest.approx(np.full((2, 2), 0.25))
    assert plan.spine_keys == 1 and plan.leaf_keys == [1, 1] and plan.imbalance == 0
    spine = kr.plan_racks(shares, owner, 2, 2, 10, 0.05, 0.8, leaves=False)
    assert spine.loads == pytest.approx(np.array([[0.375, 0.125], [0.375, 0.125]]))
    leaves = kr.plan_racks(shares, owner, 2, 2, 10, 0.05, 0.8, spine=False)
    assert leaves.loads == pytest.approx(np.array([[0.375, 0.375], [0.125, 0.125]]))
    assert spine.imbalance == pytest.approx(0.5) and leaves.imbalance == pytest.approx(0.5)


def test_a_skewed_workload_over_racks() -> None:
    keyhash, shares = kr.workload_keys(100_000, 0.99, 4_000)
    owner = kr.owners_equal_ranges(keyhash, 4 * 8).astype(np.int64)
    plans = {name: kr.plan_racks(shares, owner, 4, 8, 1_000, 0.05, 0.8, *levels)
             for name, levels in kr.LEVELS.items()}
    for p in plans.values():
        assert p.loads.sum() == pytest.approx(1.0)        # every request lands somewhere
    lam = {name: p.imbalance for name, p in plans.items()}
    assert lam["spine+leaves"] < 0.05 < min(lam["leaves"], lam["spine"], lam["original"])
    # each level bounds max/mean − 1 by ε = 0.05: two levels by 1.05²
    assert plans["spine+leaves"].loads.max() / plans["spine+leaves"].loads.mean() <= 1.05 ** 2


def test_bad_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert kr.main(["--racks", "0"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_leaf_prewarm_is_what_reaches_each_leaf() -> None:
    """The popularity a prewarmed leaf plans on (kvswitch.leaf_prewarm): the
    one hot key of test_one_hot_key_needs_both_levels lands on both racks,
    a quarter of the load at each, which is 0.25 / (0.25 + 2 x 0.125) = half
    of what reaches a leaf; a cold key reaches its owner's rack only."""
    from netkv.config.compose import load
    from netkv.protocols.kvswitch import leaf_prewarm

    proto = load(["protocol=kvswitch", "protocol.hot_keys=10"]).protocol
    shares = [(b"hot", 0.5), (b"cold", 1e-9)]
    per_leaf = leaf_prewarm(shares, np.array([0, 3]), 2, 2, proto)
    assert [k for k, _ in per_leaf[0]] == [b"hot"]
    assert [k for k, _ in per_leaf[1]] == [b"hot", b"cold"]
    assert per_leaf[0][0][1] == pytest.approx(0.5, rel=1e-6)
    assert per_leaf[1][0][1] == pytest.approx(0.5, rel=1e-6)
    # with the spine's copies counted twice, the load would not add up
    _rs, reach = kr.after_spine(np.array([0.5, 1e-9]), np.array([0, 3]), 2, 2, 10, 0.05, 0.8)
    assert sum(float(load.sum()) for _, load in reach) == pytest.approx(0.5 + 1e-9)
