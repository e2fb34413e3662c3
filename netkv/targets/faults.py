"""target.faults events on a rack of real processes, at their wall times.

Each event (a replica's crash or restart, the switch's outage or restart)
is due at a time counted from the first point's start and fires once per
rack, in the point whose wall time it falls in (or before the next point's
traffic starts, if it fell between two). A point runs its due events in time order
on one thread; an event that fails stops the rest, and the point reports it
(``FaultFailed``): a replica left down or a switch never restarted would
otherwise pass for the protocol's behaviour.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from netkv.slo import MeasurementError


class FaultFailed(MeasurementError):
    """A scheduled fault event could not be applied: the point did not run
    the faults it was configured with (one line, exit code 1)."""


@dataclass(frozen=True)
class FaultEvent:
    key: Hashable                    # fires once per rack
    at_s: float                      # from the first point's start
    what: str                        # for the error line: "server 2's restart at 0.8 s"
    action: Callable[[], None]


class FaultClock:
    """The rack's fault events across its points."""

    def __init__(self) -> None:
        self.origin_ns: int | None = None
        self.fired: set[Hashable] = set()
        #: when each fired event's action returned (CLOCK_MONOTONIC ns): a
        #: restart takes effect then, not at its at_s (the testbed's switch,
        #: restarted over SSH and reinstalled by its controller, took
        #: 0.24-0.33 s in 12 runs of tests/test_testbed_faults.py)
        self.done_ns: dict[Hashable, int] = {}

    def fire(self, event: FaultEvent) -> FaultFailed | None:
        """Apply ``event`` now; the failure, one line, if it failed."""
        try:
            event.action()
        except Exception as exc:  # noqa: BLE001 - any cause, reported by the point
            cause = " ".join(str(exc).split()) or type(exc).__name__
            return FaultFailed(f"target.faults: {event.what} failed: {cause}")
        self.fired.add(event.key)
        self.done_ns[event.key] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        return None

    def catch_up(self, events: list[FaultEvent]) -> None:
        """Before a point's traffic: apply the events that fell due between
        points (a switch restarted then serves the point from its start)."""
        if self.origin_ns is None:
            return
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        for e in sorted(events, key=lambda e: e.at_s):
            if e.key not in self.fired and self.origin_ns + int(e.at_s * 1e9) <= now:
                failure = self.fire(e)
                if failure is not None:
                    raise failure

    def start(self, start_ns: int, events: list[FaultEvent]) -> "FaultRun":
        """Run the events not fired yet, from the point starting at ``start_ns``."""
        if self.origin_ns is None:
            self.origin_ns = start_ns
        due = sorted((e for e in events if e.key not in self.fired), key=lambda e: e.at_s)
        return FaultRun(self, self.origin_ns, due)


class FaultRun:
    """One point's fault events, on a thread of their own (``stop`` ends it:
    what is not due yet is scheduled again by the next point)."""

    def __init__(self, clock: FaultClock, origin_ns: int, events: list[FaultEvent]) -> None:
        self.clock, self.origin_ns, self.events = clock, origin_ns, events
        self.failure: FaultFailed | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="faults")
        if events:
            self._thread.start()

    def _run(self) -> None:
        for event in self.events:
            due_ns = self.origin_ns + int(event.at_s * 1e9)
            delay = (due_ns - time.clock_gettime_ns(time.CLOCK_MONOTONIC)) / 1e9
            if self._stop.wait(max(0.0, delay)):
                return
            self.failure = self.clock.fire(event)
            if self.failure is not None:
                return

    def stop(self) -> FaultFailed | None:
        """Stop scheduling (an event under way finishes first); the failure
        of an event, if one failed."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.failure
