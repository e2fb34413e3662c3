"""target.faults events on Mininet (netkv.targets.faults).

- A scheduled replica restart that fails (here: the fresh kvserver cannot
  open its control socket) stops the point with one line naming the server,
  the event and the cause (``FaultFailed``: exit code 1 from ``netkv run``).
  Before, the error stayed in the timer thread and the replica silently
  stayed down.
- NetLR through a switch outage (``target.faults.switch_outages``):
  netkv-switch killed and a fresh one started; throughput per 100 ms is ~0
  during the outage and back after it once the controller reinstalled the
  switch (epoch, resync, seq, membership); the history across the outage
  is linearizable by both checkers, a doctored one refused by both; without
  the controller's restart handling, writes after it go unanswered.
- NetMC (1 s epochs) through a switch outage: reinstalled as soon as the
  switch is back, not at its next epoch.
- hash (no controller) with an outage whose restart falls between two
  points: applied before the second point's traffic, which is served whole.
- Switch outages are refused in one line where they are not applied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

try:
    from test_mininet_hash import REASON, _leftovers
    from test_mininet_netlr import _check_both, _doctored, unexplained_losses
except ImportError:
    from tests.test_mininet_hash import REASON, _leftovers
    from tests.test_mininet_netlr import _check_both, _doctored, unexplained_losses

pytestmark = pytest.mark.mininet
skip = pytest.mark.skipif(REASON is not None, reason=REASON or "")

HASH_RACK = ["target=mininet", "protocol=hash", "servers=2", "clients=1", "keys=1000",
             "duration=0.6", "topology.timeout_us=100000", "topology.retries=0",
             "topology.drain_ms=100"]


@skip
def test_a_failed_scheduled_restart_stops_the_point_in_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from netkv.config.compose import load
    from netkv.runner import make_target
    from netkv.slo import MeasurementError
    from netkv.targets.faults import FaultFailed

    cfg = load([*HASH_RACK, "target.faults.crashes=[{server: 1, at_s: 0.1, restart_s: 0.3}]"])
    with make_target(cfg) as target:
        tag = target.state.tag
        rack: Any = target.rack
        args = rack._server_args

        # the restarted kvserver's control socket in a folder that does not exist
        monkeypatch.setattr(rack, "_server_args",
                            lambda i: [*args(i), "--ctl", "/nonexistent-netkv/s.sock"])
        with pytest.raises(FaultFailed) as err:
            target.run_point(300.0, seed=1)
        assert isinstance(err.value, MeasurementError)   # netkv run: one line, exit 1
    line = str(err.value)
    print(line)
    assert "\n" not in line
    assert "server 1's restart at 0.3 s failed" in line
    assert "kvserver 1 exited" in line and "/nonexistent-netkv/s.sock" in line
    links, procs = _leftovers(tag)
    assert links == [] and procs == [], (links, procs)


def test_fault_events_run_in_time_order_once_and_stop_at_the_first_failure() -> None:
    import time

    from netkv.targets.faults import FaultClock, FaultEvent

    done: list[str] = []

    def fail() -> None:
        raise RuntimeError("no\nluck")

    clock = FaultClock()
    events = [FaultEvent("b", 0.02, "b", lambda: done.append("b")),
              FaultEvent("a", 0.0, "a", lambda: done.append("a")),
              FaultEvent("c", 0.03, "c at 0.03 s", fail),
              FaultEvent("d", 0.04, "d", lambda: done.append("d"))]
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    run = clock.start(now, events)
    time.sleep(0.1)
    failure = run.stop()
    assert done == ["a", "b"] and clock.fired == {"a", "b"}
    # when each fired action returned: in order, not before it was due;
    # a failed event has none
    assert set(clock.done_ns) == {"a", "b"}
    assert now <= clock.done_ns["a"] <= clock.done_ns["b"] and clock.done_ns["b"] >= now + 2 * 10**7
    assert failure is not None and str(failure) == "target.faults: c at 0.03 s failed: no luck"
    # the next point runs only what has not fired, counted from the first start
    done.clear()
    run = clock.start(now + 10**9, [events[0], events[1], events[3]])
    time.sleep(0.05)
    assert run.stop() is None and done == ["d"]


# --- a switch outage under NetLR --------------------------------------------------------

NETLR_RACK = ["target=mininet", "protocol=netlr", "servers=4", "clients=2", "keys=2000",
              "alpha=1.2", "write_ratio=0.2", "duration=2.4", "record_history=true",
              "topology.timeout_us=100000", "topology.retries=0", "topology.drain_ms=300",
              "topology.timeline_ms=100", "target.min_epoch_ms=10",
              "protocol.ack_superseded=true"]
AT_S, RESTART_S = 0.6, 1.2
OUTAGE = [f"target.faults.switch_outages=[{{at_s: {AT_S}, restart_s: {RESTART_S}}}]"]


# netkv-switch serves ~0.25 s after it is started here (it opens a
# 4,096-frame ring on each of its ports), then the controller installs it:
# throughput is expected back from the window starting 0.4 s after the
# restart, or from the first window after the restart took effect when it
# took longer. Measured on the testbed's namespace rack (SSH), 25 runs: the
# restart event (new switch, reconnect, the controller's reinstall) returned
# 0.27-0.44 s after restart_s; every request lost after the restart was
# issued before it returned (by 1-16 ms), none after. A fixed 0.4 s failed
# the runs past it (2 of 25, 31 and 5 requests lost; once in CI).
BACK_WITHIN_S = 0.4
END_S = 2.4


def restart_took_s(target: Any, key: Any = ("switch up", 0)) -> float:
    """Seconds from the first point's start to when fault event ``key``
    returned (the restart's: the switch reinstalled; the outage's: the
    switch killed): the rack's own timing."""
    clock = target.faults
    assert clock.origin_ns is not None and key in clock.done_ns, clock.done_ns
    return (clock.done_ns[key] - clock.origin_ns) / 1e9


def down_from_s(done_s: float, at_s: float = AT_S) -> float:
    """Seconds after at_s from which windows must be down: 0.1, or the first
    100 ms window starting after the kill returned (the testbed's, over
    SSH on a loaded machine, returned 0.12 s late once: its 0.7 s window
    still completed 24)."""
    import math

    return max(0.1, math.ceil(round(done_s * 10, 6)) / 10 - at_s)


def back_from_s(done_s: float, restart_s: float = RESTART_S) -> float:
    """Seconds after restart_s from which windows must be back: 0.4, or
    the first 100 ms window starting after the restart returned."""
    import math

    return max(BACK_WITHIN_S, math.ceil(round(done_s * 10, 6)) / 10 - restart_s)


def outage_verdicts(t_s: Any, completed: Any, at_s: float = AT_S,
                    restart_s: float = RESTART_S,
                    back_s: float = BACK_WITHIN_S, down_s: float = 0.1) -> tuple[bool, bool]:
    """(throughput ~ 0 during the outage, back after it) on 100 ms windows:
    the windows wholly inside the outage from down_s after it began complete
    <= 2% of the level before it (the windows from 0.1 s to at_s); the
    windows from back_s after the restart to the end of the offered load
    complete >= 85% of that level on average, and none below 60% (none
    left: not back)."""
    import numpy as np

    t, c = np.asarray(t_s, dtype=float), np.asarray(completed, dtype=float)
    eps = 1e-9
    level = c[(t >= 0.1 - eps) & (t + 0.1 <= at_s + eps)].mean()
    during = c[(t >= at_s + down_s - eps) & (t + 0.1 <= restart_s + eps)]
    after = c[(t >= restart_s + back_s - eps) & (t + 0.1 <= END_S + eps)]
    down = bool(len(during) and during.max() <= 0.02 * level)
    back = bool(len(after) and after.mean() >= 0.85 * level and after.min() >= 0.6 * level)
    return down, back


def test_outage_verdicts_fail_without_the_drop_or_the_recovery() -> None:
    t = [round(0.1 * i, 1) for i in range(27)]
    level = 150.0

    def series(f: Any) -> list[float]:
        return [float(f(x)) for x in t]

    assert outage_verdicts(t, series(lambda s: 0 if AT_S <= s < RESTART_S else level)) == (
        True, True)
    assert outage_verdicts(t, series(lambda s: level)) == (False, True)       # never down
    assert outage_verdicts(t, series(lambda s: 0 if s >= AT_S else level)) == (True, False)
    # back at half the level only
    assert outage_verdicts(t, series(lambda s: level if s < AT_S else
                                     (0 if s < RESTART_S else level / 2)))[1] is False
    # back only 0.7 s after the restart: refused from 0.4 s, judged from
    # the first window after a restart that returned at 1.85 s; a restart
    # that returned after the offered load leaves no window: not back
    late = series(lambda s: 0 if AT_S <= s < RESTART_S + 0.7 else level)
    assert outage_verdicts(t, late)[1] is False
    assert back_from_s(1.85) == pytest.approx(0.7)
    assert back_from_s(1.3) == BACK_WITHIN_S
    assert outage_verdicts(t, late, back_s=back_from_s(1.85)) == (True, True)
    assert outage_verdicts(t, late, back_s=back_from_s(2.35))[1] is False
    # down only 0.15 s after at_s: refused from 0.1 s, judged from the first
    # window after a kill that returned at 0.72 s; a kill that returned
    # after the last window before the restart leaves none: not down
    slow = series(lambda s: 0 if AT_S + 0.15 <= s < RESTART_S else level)
    assert outage_verdicts(t, slow)[0] is False
    assert down_from_s(0.72) == pytest.approx(0.2) and down_from_s(0.65) == 0.1
    assert outage_verdicts(t, slow, down_s=down_from_s(0.72)) == (True, True)
    assert outage_verdicts(t, slow, down_s=down_from_s(1.15))[0] is False


def _outage_run(out: Path, base: list[str] = NETLR_RACK
                ) -> tuple[Any, Any, dict[str, int], str, list[int], tuple[float, float]]:
    """One 2.4 s NetLR point at 1,500 req/s through the outage on ``base``
    (this rack; the testbed's test passes its own), its history in
    ``out``: (point, controller, switch registers, run tag, the requests
    issued after the restart returned that got no reply and are not a
    superseded write, when the kill and the restart returned in seconds)."""
    import json

    from netkv.config.compose import load
    from netkv.mininet.history import read_csvs
    from netkv.runner import make_target

    cfg = load([*base, *OUTAGE])
    with make_target(cfg) as target:
        tag = target.state.tag
        point = target.run_point(1500.0, seed=3)
        ctl: Any = target.controller
        regs = {name: target.driver.reg_read(name, 0)
                for name in ("epoch", "seq", "num_replica", "LiveMask")}
        assert target.write_history(out)
        ops = read_csvs(target.histories)
        origin = target.faults.origin_ns
        done_s = restart_took_s(target)
        down_done_s = restart_took_s(target, ("switch down", 0))
    assert origin is not None
    back_ns = origin + int(done_s * 1e9)
    lost = [i for i in unexplained_losses(ops) if int(ops.invoke_ns[i]) >= back_ns]
    tl = point.timeline
    print(json.dumps({"issued": point.issued, "completed": point.completed, "lost_after": len(lost),
                      "kill_returned_s": round(down_done_s, 3),
                      "restart_returned_s": round(done_s, 3),
                      "t_s": [round(float(x), 1) for x in tl["t_s"]],
                      "completed_per_100ms": [int(x) for x in tl["completed"]],
                      "restarts": ctl.stats.restarts, "regs": regs}))
    return point, ctl, regs, tag, lost, (down_done_s, done_s)


@skip
def test_netlr_switch_outage_on_mininet_recovers_and_stays_linearizable(
        tmp_path: Path) -> None:
    """netkv-switch killed at 0.6 s and a fresh one (empty state, no replica
    live: boot_empty) started at 1.2 s, in one 2.4 s point at 1,500 req/s:
    nothing completes during the outage; at its next 10 ms poll the
    controller installs epoch 1, resyncs the replicas, resumes seq past
    every stored version and installs membership, and throughput is back;
    the history across the outage is linearizable by both checkers and
    refused by both once one read is doctored."""
    out = tmp_path / "history.jsonl"
    point, ctl, regs, tag, lost, done = _outage_run(out)
    assert_outage_recovered(point, ctl, regs, lost, out, tmp_path, done)
    links, procs = _leftovers(tag)
    assert links == [] and procs == [], (links, procs)


def assert_outage_recovered(point: Any, ctl: Any, regs: dict[str, int], lost: list[int],
                            out: Path, tmp_path: Path, done: tuple[float, float]) -> None:
    """Down during the outage, back after it, reinstalled at epoch 1, every
    request issued after the reinstall answered, the history linearizable by
    both checkers and a doctored one refused (Mininet's and the testbed's
    test)."""
    tl = point.timeline
    assert outage_verdicts(tl["t_s"], tl["completed"], back_s=back_from_s(done[1]),
                           down_s=down_from_s(done[0])) == (True, True)
    assert lost == []   # every request after the reinstall answered (but superseded writes)
    [(epoch, resumed, _keys)] = ctl.stats.restarts
    assert epoch == 1 == regs["epoch"] and resumed > 1 and regs["seq"] > resumed
    assert regs["num_replica"] == 4 and regs["LiveMask"] == 0xF
    wgl, porc = _check_both(out)
    print({"wgl": wgl, "porcupine": porc})
    assert wgl is True and porc in (True, None)
    assert _check_both(_doctored(out, tmp_path / "doctored.jsonl")) == (
        False, None if porc is None else False)


@skip
def test_netlr_switch_outage_without_restart_handling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The negative control: the controller reinstalls only membership after
    the restart (seq back at 1, epoch 0, no resync). New writes get seqs
    below the versions the replicas store and are discarded unanswered, so
    the check that every request after the recovery is answered fails.
    (With no loss here every replica holds the same versions, so a
    discarded write is discarded everywhere and the history, its writes
    without outcome, stays linearizable; the simulator's run of the same
    control, with 1% loss, is refused by both checkers.)"""
    from netkv.protocols import netlr

    monkeypatch.setattr(netlr.NetLRController, "_restarted", lambda self: None)
    out = tmp_path / "history.jsonl"
    _, ctl, regs, _, lost, _ = _outage_run(out)
    assert ctl.stats.restarts == [] and regs["epoch"] == 0
    assert len(lost) > 0


def test_switch_outages_refused_in_one_line_where_not_applied() -> None:
    from netkv.config.compose import load
    from netkv.targets.base import TargetUnavailable
    from netkv.targets.mininet import check_config

    cfg = load([*NETLR_RACK, *OUTAGE])
    check_config(cfg)
    check_config(cfg, "testbed")
    with pytest.raises(TargetUnavailable, match="switch_outages on target=other"):
        check_config(cfg, "other", applies_faults=False)
    with pytest.raises(TargetUnavailable, match="target.switch=bmv2: its program cannot"):
        check_config(load([*NETLR_RACK, *OUTAGE, "target.switch=bmv2"]), "testbed")
    with pytest.raises(TargetUnavailable, match="with capture=true"):
        check_config(load([*NETLR_RACK, *OUTAGE, "capture=true"]))
    with pytest.raises(TargetUnavailable, match="target.switch=bmv2: its program cannot"):
        check_config(load([*NETLR_RACK, *OUTAGE, "target.switch=bmv2"]))


@skip
def test_an_outage_across_two_points_without_a_controller() -> None:
    """hash (no controller: netkv-switch's init installs its whole state):
    the switch is killed in the first point and restarted at a time that
    falls between the two points, so the second point applies it before its
    traffic starts and is served in full; the first lost what was issued
    after the kill."""
    import time

    from netkv.config.compose import load
    from netkv.runner import make_target

    cfg = load([*HASH_RACK, "target.faults.switch_outages=[{at_s: 0.3, restart_s: 2.0}]"])
    with make_target(cfg) as target:
        tag = target.state.tag
        first = target.run_point(300.0, seed=1)      # 1 s (target.min_duration_s)
        assert target.rack.switch_down        # still down between the points
        origin = target.faults.origin_ns
        assert origin is not None
        time.sleep(max(0.0, (origin + 2.1e9 - time.clock_gettime_ns(time.CLOCK_MONOTONIC)) / 1e9))
        second = target.run_point(300.0, seed=2)
        assert target.switch_restarts == 1 and not target.rack.switch_down
    print({"first": (first.issued, first.completed), "second": (second.issued, second.completed)})
    assert 0.2 * first.issued < first.completed < 0.4 * first.issued   # killed at 0.3 of 1 s
    assert second.completed == second.issued > 100
    links, procs = _leftovers(tag)
    assert links == [] and procs == [], (links, procs)


NETMC_RACK = ["target=mininet", "protocol=netmc", "servers=5", "clients=1", "keys=20000",
              "workload.key_size=8", "workload.multiget.mean=8.6",
              "workload.multiget.max_keys=16", "workload.value_size=256",
              "slo.reference=netmc", "write_ratio=0.05", "duration=2.4",
              "topology.timeout_us=100000", "topology.retries=0", "topology.drain_ms=300",
              "topology.timeline_ms=100"]


@skip
def test_netmc_is_reinstalled_when_the_switch_is_back_not_at_its_next_epoch() -> None:
    """NetMC's controller epoch is 1 s (its state is installed at start
    only). netkv-switch killed at 0.6 s and restarted empty at 1.2 s: the
    controller installs AddrTable and the PRE groups as soon as it has
    reconnected, so multigets are served again from 0.4 s after the restart;
    installed at the next epoch instead (2.0 s), the windows from 1.4 s to
    1.9 s completed only the single-key writes (1-8 each, against ~100
    before) and the recovery check failed."""
    from netkv.config.compose import load
    from netkv.runner import make_target

    cfg = load([*NETMC_RACK, *OUTAGE])
    with make_target(cfg) as target:
        tag = target.state.tag
        point = target.run_point(1000.0, seed=3)
        assert target.switch_restarts == 1 and not target.rack.switch_down
        done_s = restart_took_s(target)
        down_done_s = restart_took_s(target, ("switch down", 0))
    tl = point.timeline
    print({"t_s": [round(float(x), 1) for x in tl["t_s"]], "restart_returned_s": round(done_s, 3),
           "kill_returned_s": round(down_done_s, 3),
           "completed_per_100ms": [int(x) for x in tl["completed"]]})
    assert outage_verdicts(tl["t_s"], tl["completed"], back_s=back_from_s(done_s),
                           down_s=down_from_s(down_done_s)) == (True, True)
    links, procs = _leftovers(tag)
    assert links == [] and procs == [], (links, procs)
