"""KVSwitch on the simulator (netkv/protocols/kvswitch.py, docs/kvswitch.md):
the controller's placement and replica counts are the paper's, and the
prewarmed rack balances a skewed read load better than static hashing."""

from __future__ import annotations

import numpy as np
import pytest

from netkv.config.compose import load
from netkv.native import NativeBuildMissing, library_path
from netkv.protocols import lookup
from netkv.protocols import kvswitch as ks
from netkv.targets.sim import SimTarget

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover
    pytest.skip(str(exc), allow_module_level=True)


def test_ring_placement_is_the_papers_examples() -> None:
    # M = 8, servers numbered 0..7 here (the paper's 1..8): owner 1, r = 4 -> 3, 5, 7
    assert ks.placement(0, 4, 8) == [0, 2, 4, 6]
    # owner 4, r = 5 -> step 1 -> servers 5, 6, 7, 8
    assert ks.placement(3, 5, 8) == [3, 4, 5, 6, 7]
    assert ks.copies(10.0, 3.0, 8) == 4
    assert ks.copies(100.0, 3.0, 8) == 8      # capped at M
    assert ks.copies(3.0, 3.0, 8) == 1        # L <= T: not installed


def lam(loads: np.ndarray) -> float:
    return float(np.abs(loads - loads.mean()).sum() / (len(loads) * loads.mean()))


def run(protocol: str) -> tuple[np.ndarray, SimTarget]:
    cfg = load([f"protocol={protocol}", "alpha=0.99", "servers=16", "keys=100000",
                "duration=0.05"] + (["protocol.hot_keys=1000"] if protocol == "kvswitch" else []))
    plugin = lookup(protocol)
    tg = SimTarget(cfg, controller_factory=plugin.sim_controller(cfg),
                   params=plugin.pipeline_params(cfg))
    r = tg.run_point(1e6, 1)
    assert r.completed == r.issued
    return r.server_requests.astype(np.float64), tg


def test_kvswitch_balances_a_skewed_load_better_than_hash() -> None:
    kv, tg = run("kvswitch")
    hs, _ = run("hash")
    ctl = tg.controller_factory.last  # type: ignore[union-attr]
    assert 0 < len(ctl.hot) <= 1000
    # replicas per server well below replicate-to-all (K per server)
    assert ctl.replicas_per_server() < 1000
    assert lam(kv) < 0.5 * lam(hs), (lam(kv), lam(hs))


def test_the_point_carries_lambda_from_switch_and_server_counters() -> None:
    """Item 5 of issue #9: λ from the switch's Loadcount (over the run and per
    period, from the controller) next to λ from the servers' own counts and
    the fluid saturated throughput (the dataset's generic columns)."""
    from netkv.loadstats import imbalance_factor
    from netkv.results.rundir import saturated_rps

    cfg = load(["protocol=kvswitch", "alpha=0.99", "servers=16", "keys=100000",
                "duration=0.05", "protocol.hot_keys=1000", "protocol.period_ms=5",
                "protocol.min_period_queries=1000"])
    plugin = lookup("kvswitch")
    tg = SimTarget(cfg, controller_factory=plugin.sim_controller(cfg),
                   params=plugin.pipeline_params(cfg))
    r = tg.run_point(1e6, 1)
    m = r.controller_metrics
    server = imbalance_factor(r.server_requests)
    assert len(m["lambda_switch_periods"]) >= 8
    # the switch counts what it sends, the servers what they serve: the same
    # requests but for the last, unread period
    assert abs(m["lambda_switch"] - server) < 0.02, (m["lambda_switch"], server)
    assert 0 < m["installed_keys"] == m["installed_fraction"] * 1000
    assert m["replicas_fraction"] == m["replicas_per_server"] / 1000
    assert 0 <= m["prediction_accuracy"] <= 1 and 0 < m["predicted_share"] <= m["true_share"] * 1.2
    sat = saturated_rps(r, r.server_requests)
    cap = tg.server_capacity_rps()
    # M·cap·L̄ / max L_j when every request reaches a server
    assert sat == pytest.approx(len(cap) * cap[0] * r.server_requests.mean()
                                / r.server_requests.max() * r.issued / r.server_requests.sum())


def test_imbalance_factor_is_the_papers_lambda() -> None:
    from netkv.loadstats import imbalance_factor

    assert imbalance_factor(np.array([5, 5, 5, 5])) == 0.0
    assert imbalance_factor(np.array([8, 0, 0, 0])) == pytest.approx(2 - 2 / 4)  # the maximum
    assert imbalance_factor(np.array([0, 0])) == 0.0


def test_bulk_register_reads_equal_cell_reads() -> None:
    """The controller reads HotkeyCount/HashPipe/Loadcount per period in one
    call (nk_sim_reg_read_range), as a switch's bulk Thrift read."""
    from netkv.drivers.base import DriverError
    from netkv.sim.control import SimControlPlane
    from netkv.sim.engine import SimEngine

    cfg = load(["protocol=kvswitch", "alpha=0.99", "servers=8", "keys=10000",
                "duration=0.01", "protocol.hot_keys=64"])
    plugin = lookup("kvswitch")
    tg = SimTarget(cfg)
    with SimEngine(cfg, tg.workload, 5e5, 1, plugin.pipeline_params(cfg)) as eng:
        eng.run(None, None)
        sw = SimControlPlane(eng).switch
        for name, n in (("Loadcount", 8), ("HashPipeCount", 64)):
            assert sw.reg_read_range(name, 0, n) == [sw.reg_read(name, i) for i in range(n)]
        assert sum(sw.reg_read_range("Loadcount", 0, 8)) > 0
        with pytest.raises(DriverError):
            sw.reg_read_range("Loadcount", 30, 5)      # past the 32 cells
    tg.close()


def test_prediction_ties_do_not_depend_on_dict_order() -> None:
    """The controller's top-K is the same whatever order its candidates come
    in (they come from a set of bytes, reordered per process by
    PYTHONHASHSEED): ties are broken by key. A load-only sort keeps the
    insertion order of ties and fails this."""
    from netkv.protocols.kvswitch import top_predicted

    pred = {b"k%02d" % i: float(10 - i // 4) for i in range(12)}   # ties in fours
    forward, backward = dict(pred), dict(reversed(list(pred.items())))
    assert top_predicted(forward, 6) == top_predicted(backward, 6)
    assert [k for k, _ in top_predicted(backward, 6)] == [b"k00", b"k01", b"k02", b"k03",
                                                          b"k04", b"k05"]
    old = lambda d, k: sorted(d.items(), key=lambda kv: -kv[1])[:k]  # noqa: E731
    assert old(forward, 6) != old(backward, 6)   # the rule this replaces


def _events_per_request(extra: list[str]) -> float:
    from netkv.sim.engine import SimEngine
    cfg = load(["protocol=kvswitch", "alpha=0.99", "servers=8", "keys=10000",
                "protocol.hot_keys=100", "duration=0.01", "topology.timeline_ms=0", *extra])
    plugin = lookup("kvswitch")
    with SimTarget(cfg) as target:
        with SimEngine(cfg, target.workload, 2e5, 1, plugin.pipeline_params(cfg)) as eng:
            st = eng.run()
    assert st.completed == st.issued > 1000
    return st.events / st.issued


def test_replies_skip_the_event_queue_unless_packets_must_meet_the_switch_in_order() -> None:
    """Replies are only forwarded by KVSwitch's pipeline (order_free_pkt), so
    the simulator runs them when sent: arrival, request at the switch, at
    the server, service done = 4 events a read, not 5. A switch with a
    packet rate (switch_mpps: one FIFO) keeps every packet in time order."""
    assert _events_per_request([]) == pytest.approx(4.0, abs=0.01)
    assert _events_per_request(["topology.switch_mpps=1000"]) == pytest.approx(5.0, abs=0.01)


def test_prediction_shares_do_not_depend_on_the_sets_order() -> None:
    """true_top is a set of key bytes, whose order PYTHONHASHSEED changes
    from one process to the next: a plain sum of its shares differed in the
    last bit between two processes running the same seed."""
    class InOrder(set):  # a set iterated in a given order, as another process might
        def __init__(self, order: list[bytes]) -> None:
            super().__init__(order)
            self.order = order

        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter(self.order)

    def judged(order: list[bytes]) -> tuple[float, float]:
        ctl = ks.KVSwitchController.__new__(ks.KVSwitchController)
        ctl.truth = {b"a": 0.1, b"b": 0.2, b"c": 0.3}
        ctl.true_top = InOrder(order)
        ctl.last_prediction = order
        ctl.stats = ks.KVSwitchStats()
        ctl._judge_prediction()
        return ctl.stats.true_share[0], ctl.stats.predicted_share[0]

    # (0.1 + 0.2) + 0.3 = 0.6000000000000001, (0.3 + 0.2) + 0.1 = 0.6
    assert judged([b"a", b"b", b"c"]) == judged([b"c", b"b", b"a"]) == (0.6, 0.6)


def _outage_run(extra: list[str]) -> tuple[dict[float, int], object, object]:
    cfg = load(["protocol=kvswitch", "alpha=0.99", "servers=8", "keys=10000", "duration=0.08",
                "protocol.hot_keys=200", "write_ratio=0.2", "topology.timeout_us=2000",
                "topology.timeline_ms=5", *extra])
    plugin = lookup("kvswitch")
    tg = SimTarget(cfg, controller_factory=plugin.sim_controller(cfg),
                   params=plugin.pipeline_params(cfg))
    r = tg.run_point(200_000, 1)
    done = dict(zip(np.round(r.timeline["t_s"], 3), r.timeline["completed"], strict=True))
    return done, r, tg.controller_factory.last  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", [[], ["protocol.mode=cold", "protocol.period_ms=2",
                                       "protocol.min_period_queries=100"]],
                         ids=["prewarmed", "cold"])
def test_the_controller_reinstalls_after_a_switch_restart(mode: list[str]) -> None:
    """A switch outage at 20-25 ms (8 servers, 20% writes): the switch is back
    empty, the controller forgets its installs, evicts the keys at their owners
    (which would otherwise refuse every unstamped write: ERROR, resent) and
    installs again. From the first 5 ms window after the restart, completions
    are within 5% of the same run's without an outage, and no write is resent.
    Before: prewarmed, 211,324 retries over 0.12 s and ~870-930 completions
    per window after the restart against ~1,000; cold, the next period's
    eviction of a key the switch no longer had raised DriverError."""
    base, rb, _ = _outage_run(mode)
    done, r, ctl = _outage_run(["target.faults.switch_outages=[{at_s: 0.02, restart_s: 0.025}]",
                                *mode])
    assert rb.retries == 0 and r.retries == 0, (rb.retries, r.retries)
    assert done[0.02] < 10                       # the outage window
    after = [t for t in sorted(base) if 0.025 <= t < 0.075]
    assert len(after) == 10
    for t in after:
        assert done[t] >= 0.95 * base[t], (t, done[t], base[t])
    assert len(ctl.hot) > 0                      # installed again (cold: learned again)
    assert r.timeouts <= 1.1 * 200_000 * 0.005   # only those sent during the outage (~1,000)


@pytest.mark.parametrize("below_t", [False, True])
def test_a_fault_free_run_completes_every_request_with_keys_below_t_installed(
        below_t: bool) -> None:
    """8 servers, 20% writes, no fault, 750 k req/s for 0.2 s, a plan every
    10 ms period (min_period_queries=1000: 7,500 queries a period): every
    request completes, with install_below_t too. The old controller told
    the owner of every r = 1 install (REPL_CMD) and evicted each removal
    three times; at this period length the top K churn (thousands of keys
    seen once), so 6,000-12,000 control messages a period reached the
    servers, more than the requests: they fell behind (UPDATE_ACKs late,
    replicas never valid, T falling every period) and 5,548 of 150,202
    requests were still queued at the end (96.3%)."""
    cfg = load(["protocol=kvswitch", "servers=8", "write_ratio=0.2",
                f"protocol.install_below_t={str(below_t).lower()}",
                "protocol.min_period_queries=1000"])
    plugin = lookup("kvswitch")
    tg = SimTarget(cfg, controller_factory=plugin.sim_controller(cfg),
                   params=plugin.pipeline_params(cfg))
    with tg:
        r = tg.run_point(750_000, 1)
    assert r.timeouts == 0 and tg.last_engine_stats.unfinished == 0
    assert r.completed / r.issued == 1.0, (r.completed, r.issued)
    # no write refused: an owner evicted late (a period after its r = 1 key
    # left) answered ERROR to its writes meanwhile (21,435 resends)
    assert r.retries == 0, r.retries
    assert r.controller_metrics["periods"] >= 19
