"""Fields of ``/proc/PID/stat`` (proc(5)), read in one place.

The command name (field 2) is in parentheses and may itself hold spaces and
")" ("a) b"), so the fields are split after its last ")": index 0 of what
``fields`` returns is field 3 (state), 11/12 are utime/stime, 19 starttime.
"""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")
STATE, UTIME, STIME, STARTTIME = 0, 11, 12, 19


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
