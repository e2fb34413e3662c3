"""netkv.procstat: /proc/PID/stat fields, on this process and on made-up
stat files whose command name holds ") " (which splitting at the first ")"
misreads)."""

from __future__ import annotations

import os
from pathlib import Path

from netkv import procstat


def fake(tmp_path: Path, pid: int, comm: str, state: str) -> Path:
    # fields 3.. as the kernel writes them: state, ppid, ..., utime (14),
    # stime (15), ..., starttime (22)
    rest = [state, *map(str, range(4, 14)), "700", "11", *map(str, range(16, 22)), "123456"]
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "stat").write_text(f"{pid} ({comm}) {' '.join(rest)} 0 0\n")
    return tmp_path


def test_fields_of_a_command_name_with_a_parenthesis(tmp_path: Path) -> None:
    proc = fake(tmp_path, 42, "Z) S (x", "R")
    assert procstat.fields(42, proc)[procstat.STATE] == "R"
    assert procstat.alive(42, proc)
    assert procstat.started(42, proc) == 123456
    assert procstat.cpu_ticks(42, proc) == 711
    # a zombie is not alive; a missing process has nothing
    assert not procstat.alive(7, fake(tmp_path, 7, "a) b", "Z"))
    assert procstat.fields(9, tmp_path) is None and not procstat.alive(9, tmp_path)
    assert procstat.started(9, tmp_path) is None and procstat.cpu_ticks(9, tmp_path) == 0


def test_this_process() -> None:
    me = os.getpid()
    assert procstat.alive(me) and (procstat.started(me) or 0) > 0
    assert procstat.cpu_ticks(me) >= 0
