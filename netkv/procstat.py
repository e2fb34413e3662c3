"""Fields of ``/proc/PID/stat`` (proc(5)), read in one place.

The command name (field 2) is in parentheses and may itself hold spaces and
")" ("a) b"), so the fields are split after its last ")": index 0 of what
``fields`` returns is field 3 (state), 1 the parent's pid, 11/12 are
utime/stime, 19 starttime.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from pathlib import Path

PROC = Path("/proc")
STATE, PPID, UTIME, STIME, STARTTIME = 0, 1, 11, 12, 19


def fields(pid: int, proc: Path = PROC) -> list[str] | None:
    """The stat fields after the command name; None if there is no such process."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    rest = stat.rsplit(")", 1)
    return rest[1].split() if len(rest) == 2 else None


def alive(pid: int, proc: Path = PROC) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    f = fields(pid, proc)
    return bool(f) and f[STATE] != "Z"


def started(pid: int, proc: Path = PROC) -> int | None:
    """Start time in clock ticks since boot: with the pid it names one
    process (a reused pid is another). None if there is no such process."""
    f = fields(pid, proc)
    return int(f[STARTTIME]) if f and len(f) > STARTTIME else None


def cpu_ticks(pid: int, proc: Path = PROC) -> int:
    """User + system CPU time in clock ticks, 0 if the process is gone."""
    f = fields(pid, proc)
    return int(f[UTIME]) + int(f[STIME]) if f and len(f) > STIME else 0


def owner_record(pid: int | None = None, proc: Path = PROC) -> str:
    """``"<pid> <start time>"`` of ``pid`` (this process by default): what a
    folder's owner file holds, naming one process even after its pid is
    reused."""
    pid = os.getpid() if pid is None else pid
    return f"{pid} {started(pid, proc)}"


def owner_running(record: str, proc: Path = PROC) -> bool:
    """Whether the process an ``owner_record`` names still runs (not a
    zombie, and the same start time: a reused pid is another process). A
    record of the pid alone (written by netkv before 2026-11-29) is judged by
    the pid. ValueError if ``record`` is not one."""
    words = record.split()
    if len(words) not in (1, 2):
        raise ValueError(f"not an owner record: {record!r}")
    pid = int(words[0])
    if pid <= 0:
        raise ValueError(f"not an owner record: {record!r}")
    if not alive(pid, proc):
        return False
    return len(words) == 1 or started(pid, proc) == int(words[1])


def wait_exited(records: Collection[str], timeout_s: float) -> None:
    """Until none of the processes ``records`` name runs (``owner_record``s;
    one that is not a record, e.g. a file cut short, names none), or
    ``timeout_s`` has passed."""
    def running(record: str) -> bool:
        try:
            return owner_running(record)
        except ValueError:
            return False

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(running(r) for r in records):
        time.sleep(0.05)
