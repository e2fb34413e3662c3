"""NetLR on the simulator (netkv/protocols/netlr.py, docs/netlr.md): reads
spread round-robin, writes commit through the switch, a failed replica is
removed within 10 ms of simulated time and a restarted one re-added with
its store caught up; strict-mode histories are linearizable under loss,
duplication, reordering and a replica crash, and the paper's algorithm is
caught by both checkers (digest §9 W2).

Write retries are off in the history runs (``topology.retries=0``, timed-out
writes are indeterminate): the simulator's client resends a write with the
same value and req_id; without ``dedup`` NetLR orders it again under a new
seq, so one write would be applied twice around another (digest §5: a
retried write is a new operation with a fresh value); with it (the default)
the switch drops the resend (docs/netlr.md "Write retries").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from netkv.config.compose import load
from netkv.lincheck import verdicts as check_verdicts
from netkv.native import NativeBuildMissing, library_path
from netkv.protocols import netlr
from netkv.targets.sim import SimTarget

try:
    library_path()
except NativeBuildMissing as exc:  # pragma: no cover
    pytest.skip(str(exc), allow_module_level=True)

HIST = ["protocol=netlr", "servers=4", "clients=4", "keys=200", "alpha=1.2",
        "write_ratio=0.3", "record_history=true", "duration=0.1",
        "topology.timeout_us=2000", "topology.retries=0"]
FAULTS = ["target.faults.loss=0.01", "target.faults.duplicate=0.01",
          "target.faults.reorder=0.01", "target.faults.reorder_us=50"]
CRASH_AT = 0.0345
CRASH = [f"target.faults.crashes=[{{server:2,at_s:{CRASH_AT}}}]"]
CRASH_RESTART = [f"target.faults.crashes=[{{server:2,at_s:{CRASH_AT},restart_s:0.06}}]"]
SWITCH_RESTART = ["target.faults.switch_outages=[{at_s:0.03,restart_s:0.05}]",
                  "target.faults.loss=0.01"]


REGS = ("num_replica", "LiveMask", "PIN", "seq", "epoch")


def run(overrides: list[str], rate: float = 200_000, path: Path | None = None,
        on_epoch=None):  # type: ignore[no-untyped-def]
    """One point; the switch's global registers as of the controller's last
    epoch (``on_epoch(engine)`` is called after each epoch too)."""
    cfg = load(overrides)
    inner = netlr.sim_controller_factory(cfg)
    regs: dict[str, int] = {}

    def factory(engine):  # type: ignore[no-untyped-def]
        epochs = inner(engine)
        step = epochs.epoch

        def epoch(eng, t_s: float) -> None:  # type: ignore[no-untyped-def]
            step(eng, t_s)
            regs.update({n: epochs.controller.plane.switch.reg_read(n, 0) for n in REGS})
            if on_epoch is not None:
                on_epoch(eng)

        epochs.epoch = epoch
        return epochs

    with SimTarget(cfg, controller_factory=factory,
                   params=netlr.pipeline_params(cfg)) as target:
        point = target.run_point(rate, 11)
        if path is not None:
            assert target.write_history(path)
    return point, inner.last, regs  # type: ignore[attr-defined]


def verdicts(path: Path) -> list[bool | None]:
    return check_verdicts(path, timeout=120)


def test_reads_round_robin_and_writes_commit() -> None:
    point, ctl, regs = run(["protocol=netlr", "servers=4", "write_ratio=0.05",
                            "workload=uniform", "duration=0.05"])
    assert point.issued > 5_000
    loads = point.server_requests.astype(np.float64)
    # every write reaches every replica, reads are spread: equal loads
    assert loads.max() / loads.mean() < 1.05, loads
    # uniform keys: writes of one key rarely overlap, so nearly all commit
    assert point.completed >= 0.995 * point.issued
    assert regs["num_replica"] == 4 and regs["LiveMask"] == 0xF
    assert regs["seq"] > 1 + 0.04 * point.issued      # one seq per write
    assert not ctl.stats.failures


def test_failed_replica_removed_within_10_ms() -> None:
    base = ["protocol=netlr", "servers=4", "write_ratio=0.05", "duration=0.1",
            "topology.timeout_us=2000", "topology.retries=0"]
    point, ctl, regs = run([*base, *CRASH])
    [(server, detected)] = ctl.stats.failures
    assert server == 2 and 0 <= detected - CRASH_AT <= 0.010
    assert regs["num_replica"] == 3 and regs["LiveMask"] == 0b1011
    assert ctl.live == [0, 1, 3]
    without, _, regs_off = run([*base, *CRASH, "protocol.fault_adaptation=false"])
    assert regs_off["num_replica"] == 4
    # without adaptation a quarter of the reads after the crash go to the dead replica
    gone = without.issued - without.completed
    assert gone > 0.2 * 0.65 * without.issued, (gone, without.issued)
    # with it, only what was in flight at the crash or before detection is lost
    assert point.issued - point.completed < 0.25 * gone


def test_restarted_replica_is_readded_with_its_store_caught_up(tmp_path: Path) -> None:
    path = tmp_path / "crash.jsonl"
    point, ctl, regs = run([*HIST, *CRASH_RESTART], path=path)
    assert [r for r, _ in ctl.stats.failures] == [2]
    [(server, live_at, copied)] = ctl.stats.recoveries
    assert server == 2 and 0.06 <= live_at <= 0.06 + 0.03 and copied > 0
    assert regs["LiveMask"] == 0xF and regs["num_replica"] == 4
    assert all(v is True for v in verdicts(path))


def test_restart_without_recovery_serves_stale_data(tmp_path: Path) -> None:
    """The negative control of the one above: the restarted replica (its
    store reset to the preload) is read again with no catch-up."""
    path = tmp_path / "stale.jsonl"
    run([*HIST, *CRASH_RESTART, "protocol.fault_adaptation=false"], path=path)
    assert all(v is False for v in verdicts(path))


@pytest.mark.parametrize("extra", [[], ["protocol.ack_superseded=true"],
                                   ["protocol.ack_superseded=true", *CRASH_RESTART]],
                         ids=["strict", "ack-superseded", "ack-superseded-crash"])
def test_strict_histories_are_linearizable_under_faults(tmp_path: Path,
                                                        extra: list[str]) -> None:
    """Also with older writes' acks answered once CRep holds them
    (ack_superseded, docs/netlr.md), and with a replica crashing and
    coming back mid-run."""
    path = tmp_path / "strict.jsonl"
    point, _, _ = run([*HIST, *FAULTS, *extra], path=path)
    assert point.timeouts > 0          # the faults did bite
    assert all(v is True for v in verdicts(path))


@pytest.mark.parametrize("dedup,expect", [(True, True), (False, False)],
                         ids=["dedup", "no-dedup"])
def test_duplicated_client_writes_are_stamped_once(tmp_path: Path, dedup: bool,
                                                   expect: bool) -> None:
    """Eight keys, half the requests writes, 5% of the packets duplicated and
    10% delayed up to 100 us: a client WRITE's delayed copy reaching the
    switch after a newer write of its key was acknowledged, stamped anew,
    puts the older value back. Strict mode drops a req_id its port had
    stamped already (dedup, docs/netlr.md "Duplicated writes"); without
    that, both checkers find the stale read."""
    path = tmp_path / "dup.jsonl"
    run([*HIST, "keys=8", "write_ratio=0.5", "clients=6", "duration=0.06",
         "target.faults.duplicate=0.05", "target.faults.reorder=0.1",
         "target.faults.reorder_us=100", f"protocol.dedup={str(dedup).lower()}"],
        rate=150_000, path=path)
    assert all(v is expect for v in verdicts(path))


@pytest.mark.parametrize("mode,expect", [("strict", True), ("paper", False)])
def test_paper_mode_loses_linearizability_under_replica_loss(tmp_path: Path, mode: str,
                                                              expect: bool) -> None:
    """W2 (digest §9): with copies and acks lost on the replica links, the
    paper's CRep follows an ack of an older write to a replica that lacks
    the newer one a read already returned; strict mode's MaxSeq rule holds."""
    path = tmp_path / f"{mode}.jsonl"
    run([*HIST, "target.faults.loss=0.02", "target.faults.links=servers",
         f"protocol.mode={mode}"], path=path)
    assert all(v is expect for v in verdicts(path))


def test_chain_replication_baseline(tmp_path: Path) -> None:
    """CR on the same hosts: the tail serves every read and every write
    passes through every replica; its histories are linearizable."""
    point, _, _ = run(["protocol=netlr", "protocol.replication=cr", "servers=4",
                       "write_ratio=0.05", "workload=uniform", "duration=0.05"], rate=100_000)
    assert point.completed == point.issued
    served = point.server_requests.astype(np.float64)
    writes = served[0]                      # the head sees only writes
    assert served[3] == pytest.approx(point.issued, rel=0.001)   # tail: reads + writes
    assert np.allclose(served[:3], writes) and 0.04 < writes / point.issued < 0.06
    path = tmp_path / "cr.jsonl"
    run([*HIST, "protocol.replication=cr"], rate=100_000, path=path)   # below the tail's capacity
    assert all(v is True for v in verdicts(path))


@pytest.mark.parametrize("adapt", [True, False], ids=["with", "without"])
def test_fig9_replicas_lost_every_200_ms(adapt: bool) -> None:
    """Fig. 9 at a tenth of its time scale: read-only, the offered load is
    one replica's capacity (0.19 of ~0.196 Mreq/s, fig8's n = 1), a replica
    crashes every 200 ms from 200 ms (the paper: every 2 s). With fault
    adaptation every 100 ms window completes >= 95% of the offered load;
    without it, reads sent round-robin to dead replicas are lost in steps
    of a quarter."""
    rate = 190_000
    point, _, _ = run(["protocol=netlr", "servers=4", "write_ratio=0", "keys=1000000",
                       "workload=uniform", "duration=1.0", "topology.timeline_ms=100",
                       "topology.timeout_us=2000", "topology.retries=0",
                       f"protocol.fault_adaptation={str(adapt).lower()}",
                       "target.faults.crashes=[{server:3,at_s:0.2},{server:2,at_s:0.4},"
                       "{server:1,at_s:0.6}]"], rate=rate)
    done = np.asarray(point.timeline["completed"])[:10] / (rate * 0.1)
    if adapt:
        assert (done >= 0.95).all(), done
    else:
        # the window of each crash is mixed; the one after it is the step
        assert done[1] > 0.95 and done[3] == pytest.approx(0.75, abs=0.03)
        assert done[5] == pytest.approx(0.50, abs=0.03)
        assert done[7:] == pytest.approx(0.25, abs=0.03), done


def test_switch_restart_keeps_strict_histories_linearizable(tmp_path: Path) -> None:
    """The switch stops at 30 ms and restarts empty at 50 ms, with 1% loss on
    every link (so some writes reached only some replicas at the outage):
    the controller installs epoch 1, resyncs the replicas and resumes seq
    past every stored version; the history is linearizable by both
    checkers, and refused by both once one read is doctored."""
    try:
        from test_mininet_netlr import _doctored
    except ImportError:
        from tests.test_mininet_netlr import _doctored
    path = tmp_path / "restart.jsonl"
    point, ctl, regs = run([*HIST, *SWITCH_RESTART], path=path)
    [(epoch, resumed, keys)] = ctl.stats.restarts
    print({"epoch": epoch, "seq_resumed": resumed, "keys_resynced": keys,
           "completed": point.completed, "issued": point.issued})
    assert epoch == 1 == regs["epoch"] and resumed > 1 and regs["seq"] > resumed
    assert regs["num_replica"] == 4 and regs["LiveMask"] == 0xF
    assert point.completed < 0.85 * point.issued      # the outage did bite
    assert all(v is True for v in verdicts(path))
    bad = _doctored(path, tmp_path / "doctored.jsonl")
    assert all(v is False for v in verdicts(bad))


def test_switch_restart_without_epoch_and_resync_is_not_linearizable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The negative control: the same run with the controller reinstalling
    only membership (seq back at 1, epoch 0, no resync): new writes reuse
    seqs the replicas already hold for other values, and both checkers
    refuse the history."""
    monkeypatch.setattr(netlr.NetLRController, "_restarted", lambda self: None)
    path = tmp_path / "naive.jsonl"
    _, ctl, regs = run([*HIST, *SWITCH_RESTART], path=path)
    assert ctl.stats.restarts == [] and regs["epoch"] == 0
    assert all(v is False for v in verdicts(path))


def _timeline_verdicts(name: str, series: dict, seconds: float) -> list[bool]:  # type: ignore[type-arg]
    """The experiment's throughput checks on made-up 100 ms timelines:
    ``series`` -> completed(t_s)."""
    import polars as pl

    from netkv.experiments.checks import evaluate_timeline
    from netkv.experiments.spec import load_experiment

    exp = load_experiment(name)
    t = [round(0.1 * i, 1) for i in range(round(seconds * 10))]
    tl = pl.concat([pl.DataFrame({"series": s, "x": "4", "t_s": t, "completed": [float(f(x)) for x in t]})
                    for s, f in series.items()])
    return [evaluate_timeline(c, pl.DataFrame(), tl, exp).passed for c in exp.checks]


def test_fig10_checks_fail_without_the_drop_or_the_recovery() -> None:
    """experiments/netlr/fig10.yaml's checks: the outage and the recovery
    pass; a switch that never went down fails the first, one that never
    came back the second."""
    def check(f):  # type: ignore[no-untyped-def]
        return _timeline_verdicts("netlr/fig10", {"netlr": f}, 25)

    assert check(lambda s: 0 if 5.0 <= s < 18.0 else 34_000) == [True, True]
    assert check(lambda s: 34_000) == [False, True]
    assert check(lambda s: 0 if s >= 5.0 else 34_000) == [True, False]


def test_fig9_checks_fail_on_a_collapse_or_without_the_steps() -> None:
    """experiments/netlr/fig9.yaml's checks: flat with adaptation and steps
    of a quarter without pass; the with series collapsing after the third
    loss, or the without series staying flat, fail."""
    def steps(s: float) -> float:
        return 19_500 * (1 - 0.25 * sum(s >= c for c in (2.0, 4.0, 6.0)))

    def flat(s: float) -> float:
        return 19_500

    def collapse(s: float) -> float:
        return 0 if s >= 6.5 else 19_500

    assert all(_timeline_verdicts("netlr/fig9", {"with": flat, "without": steps}, 10))
    assert _timeline_verdicts("netlr/fig9", {"with": collapse, "without": steps}, 10)[0] is False
    assert not all(_timeline_verdicts("netlr/fig9", {"with": flat, "without": flat}, 10))


# the measured Figs. 12/13 points (experiments/netlr/fig12.yaml, fig13.yaml
# notes): (series, load) -> (p50 us, p99 us); inf = over 1% never completed
FIG12 = {("netlr", x): v for x, v in zip(
    (50, 100, 150, 190, 300, 500, 700),
    ((8.7, 28.5), (8.7, 28.7), (8.7, 28.2), (8.8, 29.5), (9.3, 31.8), (11.6, 48.5), (22.3, 123)))}
FIG12 |= {("cr", x): v for x, v in zip(
    (50, 100, 150, 190, 300, 500, 700),
    ((10.0, 34.7), (12.2, 49.0), (18.2, 83.2), (59.3, 331), (23_700, 48_000), (76_000, np.inf),
     (np.inf, np.inf)))}
FIG13 = {("netlr", x): v for x, v in zip(
    (25, 50, 100, 150, 180, 300),
    ((15.3, 40.1), (17.0, 45.4), (22.2, 69.9), (33.9, 104), (86.3, 290), (23_800, np.inf)))}
FIG13 |= {("cr", x): v for x, v in zip(
    (25, 50, 100, 150, 180, 300),
    ((33.9, 68.9), (37.8, 78.6), (50.3, 117), (81.2, 186), (208, 592), (25_600, 50_000)))}


@pytest.mark.parametrize(("name", "points"), [("netlr/fig12", FIG12), ("netlr/fig13", FIG13)])
def test_fig12_13_checks_hold_on_the_measured_points_and_fail_on_swapped_ones(
        name: str, points: dict) -> None:  # type: ignore[type-arg]
    """Every check of the figure holds on the points measured (the notes);
    with the two series' latencies swapped, or CR never saturating, some fail."""
    import polars as pl

    from netkv.experiments.checks import evaluate
    from netkv.experiments.spec import load_experiment

    exp = load_experiment(name)

    def table(pts: dict) -> pl.DataFrame:  # type: ignore[type-arg]
        keys = sorted(pts)
        return pl.DataFrame({"series": [s for s, _ in keys], "x": [str(x * 1000) for _, x in keys],
                             "met": [True] * len(keys),
                             "p50_ns": [pts[k][0] * 1e3 for k in keys],
                             "p99_ns": [pts[k][1] * 1e3 for k in keys]})

    assert all(evaluate(c, table(points), exp).passed for c in exp.checks)
    swapped = {(("cr" if s == "netlr" else "netlr"), x): v for (s, x), v in points.items()}
    assert not all(evaluate(c, table(swapped), exp).passed for c in exp.checks)
    flat = {k: (v if k[0] == "netlr" else (10.0, 40.0)) for k, v in points.items()}
    assert not all(evaluate(c, table(flat), exp).passed for c in exp.checks)
