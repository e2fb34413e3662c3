"""Several switches in the simulator (topology.kind=racks): a spine with the
clients and one leaf per rack of servers, each switch its own pipeline.

With hash (2 racks x 2 servers) every request reaches its home through the
spine and its rack's leaf and back: the same requests as on one rack, each
exactly two trunk hops (link + pipeline latency) later, and every switch
processes what its links carry. Misrouting is seen: a node_fwd entry that
points at the wrong trunk loops until the hop limit drops it, and one that
points at a port the switch has no host on is dropped there."""

from __future__ import annotations

import numpy as np
import pytest

from netkv.cli import main
from netkv.config.compose import load
from netkv.sim.engine import SimEngine
from netkv.targets.sim import SimTarget

BASE = ["servers=4", "clients=2", "keys=10000", "alpha=0.99", "duration=0.05",
        "topology.server.service=deterministic", "topology.link_gbps=0"]
RACKS = ["topology.kind=racks", "topology.racks=2"]


def run(extra: list[str], setup=None) -> dict:
    cfg = load([*BASE, *extra])
    with SimTarget(cfg) as target, SimEngine(cfg, target.workload, 20_000, seed=3) as eng:
        if setup:
            setup(eng)
        st = eng.run()
        return {"stats": st, "served": eng.server_counts(), "sw": eng.switch_stats(),
                "switches": eng.switches}


def check_racks(one: dict, racks: dict, per_rack: int = 2) -> None:
    """What a correct spine + leaves run must show against one rack."""
    st1, st2 = one["stats"], racks["stats"]
    assert st2.completed == st2.issued == st1.issued
    assert st2.dropped == 0
    assert np.array_equal(one["served"], racks["served"])
    # every request and reply crosses one trunk each way: 2 x (link + switch)
    top = load(BASE).topology
    assert st2.mean_ns - st1.mean_ns == pytest.approx(
        2 * (top.link_latency_ns + top.switch_latency_ns), abs=1.0)
    # the spine sees every request and reply; a leaf those of its rack
    packets = racks["sw"]["packets"]
    assert packets[0] == 2 * st2.completed
    for r in range(racks["switches"] - 1):
        assert packets[1 + r] == 2 * racks["served"][r * per_rack:(r + 1) * per_rack].sum()


def test_two_racks_route_through_spine_and_leaf():
    one, racks = run([]), run(RACKS)
    assert one["switches"] == 1 and racks["switches"] == 3
    assert list(one["sw"]["packets"]) == [2 * one["stats"].completed]
    assert min(racks["served"]) > 0   # every server, so both leaves, had traffic
    check_racks(one, racks)


def test_trunk_ports_and_initial_node_fwd():
    cfg = load([*BASE, *RACKS])
    with SimTarget(cfg) as target, SimEngine(cfg, target.workload, 1_000, seed=3) as eng:
        first = eng.cpu_port + 2   # node ports, CPU, recirculation, then trunks
        assert eng.trunk_port(0, 1) == first and eng.trunk_port(0, 2) == first + 1
        assert eng.trunk_port(1, 0) == eng.trunk_port(2, 0) == first
        with pytest.raises(ValueError):
            eng.trunk_port(1, 2)   # leaves are linked through the spine only
        with pytest.raises(ValueError):
            eng.select_switch(3)


def misroute_server0(eng: SimEngine) -> None:
    # the spine sends server 0 (rack 0) to rack 1's leaf, which sends it back
    eng.select_switch(0)
    eng.table_add("node_fwd", [0], [eng.trunk_port(0, 2)])


def unwired_server1(eng: SimEngine) -> None:
    # the spine has no host on server 1's port: server 1 is on leaf 1
    eng.select_switch(0)
    eng.table_add("node_fwd", [1], [1])


def test_forwarding_loop_is_dropped_and_fails_the_check():
    one, bad = run([]), run(RACKS, misroute_server0)
    st = bad["stats"]
    assert bad["served"][0] == 0 and st.completed == st.issued - one["served"][0]
    assert st.drop_switch == one["served"][0]
    # the loop ends at a switch (the hop limit), counted there
    assert bad["sw"]["dropped"].sum() == one["served"][0]
    with pytest.raises(AssertionError):
        check_racks(one, bad)


def test_unwired_port_is_dropped_at_that_switch():
    one, bad = run([]), run(RACKS, unwired_server1)
    assert list(bad["sw"]["dropped"]) == [one["served"][1], 0, 0]
    with pytest.raises(AssertionError):
        check_racks(one, bad)


def test_controller_hooks_reach_the_selected_switch_only():
    cfg = load([*BASE, *RACKS])
    with SimTarget(cfg) as target, SimEngine(cfg, target.workload, 20_000, seed=3) as eng:
        eng.run()
        drops = []
        for sw in range(eng.switches):
            eng.select_switch(sw)
            drops.append(eng.reg_read("dropped", 0))
        # each pipeline counted only its own packets: none dropped anywhere
        assert drops == [0, 0, 0]
        eng.select_switch(2)
        eng.reg_write("dropped", 0, 7)
        eng.select_switch(1)
        assert eng.reg_read("dropped", 0) == 0
        eng.select_switch(2)
        assert eng.reg_read("dropped", 0) == 7


@pytest.mark.parametrize(("overrides", "words"), [
    (["servers=6", "topology.kind=racks", "topology.racks=4"], ["topology.racks", "4", "dividing"]),
    (["servers=6", "topology.kind=racks", "topology.racks=1"], ["topology.racks", "2..64"]),
    (["servers=300"], ["servers", "300", "1..256", "kind=racks"]),
    (["topology.racks=2"], ["topology.racks", "kind=rack"]),
    (["servers=4", "topology.kind=racks", "topology.racks=2", "target=mininet"],
     ["topology.kind", "racks", "mininet"]),
    (["servers=4", "topology.kind=racks", "topology.racks=2", "capture=true"],
     ["capture", "racks"]),
])
def test_bad_racks_config_is_one_line_exit_2(overrides, words, capsys, tmp_path):
    code = main(["run", *overrides, f"out={tmp_path}/r"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    for word in words:
        assert word in err[0], (word, err[0])
