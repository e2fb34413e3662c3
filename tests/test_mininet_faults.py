"""target.faults events on Mininet (netkv.targets.faults).

- A scheduled replica restart that fails (here: the fresh kvserver cannot
  open its control socket) stops the point with one line naming the server,
  the event and the cause (``FaultFailed``: exit code 1 from ``netkv run``).
  Before, the error stayed in the timer thread and the replica silently
  stayed down.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

try:
    from test_mininet_hash import REASON, _leftovers
except ImportError:
    from tests.test_mininet_hash import REASON, _leftovers

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
    assert failure is not None and str(failure) == "target.faults: c at 0.03 s failed: no luck"
    # the next point runs only what has not fired, counted from the first start
    done.clear()
    run = clock.start(now + 10**9, [events[0], events[1], events[3]])
    time.sleep(0.05)
    assert run.stop() is None and done == ["d"]
