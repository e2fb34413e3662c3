"""Leftovers of Mininet runs: the state a run records, and ``clean()``.

Every run gets a short tag (``nk`` + 3 base-36 characters) that prefixes all
its node and interface names, and a state folder ``STATE_ROOT/<tag>/`` with
``state.json``: the owner's pid and start time, its parent's (a sweep's command
for a joblib worker), and every pid the run started (Mininet's
node shells, netkv-switch or BMv2's simple_switch_grpc, kvservers,
kvclients; a switch carries the tag in its command line through its
interface names: ``--port nkab1sw-eth1``, ``-i 0@nkab1sw-eth1``).
``clean()`` looks at each folder whose owner is gone (or every folder with
``force=True``), stops the recorded processes (only if /proc still shows
them carrying the tag or the run's program paths, so a recycled pid is never
hit), deletes interfaces named with the tag, and removes the folder.
``clean_children()`` does the same for the runs of this process's children
only (a sweep's joblib workers, which joblib kills mid-teardown).
Killing a node's shell frees its network namespace, and with it the host
end of every veth.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from netkv import procstat, statedir
from netkv.backends import programs as backend_programs

STATE_ROOT = Path(os.environ.get("NETKV_MININET_STATE", "/run/netkv/mininet"))
TAG_PREFIX = "nk"
# the hosts' programs, Mininet's node shells, and every switch back-end's
PROGRAMS = ("kvserver", "kvclient", "mnexec", "bash", *backend_programs())


@dataclass
class RunState:
    """What one run started, kept on disk so that a crash leaves a map."""

    tag: str
    folder: Path
    owner: int = field(default_factory=os.getpid)
    # "<pid> <start time>" of the owner's parent: a sweep command finds its
    # workers' runs by it once joblib has killed them (clean_children)
    parent: str = field(default_factory=lambda: procstat.owner_record(os.getppid()))
    pids: list[int] = field(default_factory=list)

    @classmethod
    def create(cls) -> "RunState":
        # owner-only: run folders hold control sockets and logs
        # (docs/security.md); the record is in the folder as it appears
        # (netkv.statedir), so a sweep's command finds a killed worker's
        state = cls("", Path())
        folder = statedir.create(STATE_ROOT, TAG_PREFIX, {"state.json": state._record()})
        state.tag, state.folder = folder.name, folder
        state.save()
        return state

    def save(self) -> None:
        tmp = self.folder / "state.json.tmp"
        tmp.write_text(self._record())
        tmp.replace(self.folder / "state.json")

    def _record(self) -> str:
        # the owner's start time with its pid: a reused pid is another process
        return json.dumps({"tag": self.tag, "owner": self.owner,
                           "owner_start": procstat.started(self.owner),
                           "parent": self.parent, "pids": self.pids})

    def add_pid(self, pid: int) -> None:
        self.pids.append(pid)
        self.save()


def _record(pid: int, start: int | None = None) -> str:
    """A run owner's ``procstat.owner_record``; a state file without the start
    time (netkv before 2026-11-29) names the pid alone."""
    return f"{pid} {start}" if start is not None else str(pid)


def _alive(pid: int, start: int | None = None) -> bool:
    """Whether run owner ``pid`` still runs: a zombie counts as gone, and so
    does a process with another start time (a reused pid)."""
    return procstat.owner_running(_record(pid, start))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _ours(pid: int, tag: str, programs: Collection[str] = PROGRAMS) -> bool:
    """The process still is one of this run's (not a recycled pid): one of
    ``programs`` carrying ``tag``."""
    cmd = _cmdline(pid)
    if not cmd:
        return False
    first = os.path.basename(cmd.split(" ", 1)[0])
    return tag in cmd and first in programs


def _tagged_pids(tag: str, programs: Collection[str] = PROGRAMS) -> list[int]:
    """Processes carrying the tag (``mininet:<tag>..`` shells, ``--tag <tag>``)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid() \
                and _ours(int(entry.name), tag, programs):
            pids.append(int(entry.name))
    return pids


def _stop(pids: list[int], removed: list[str], tag: str,
          programs: Collection[str] = PROGRAMS) -> None:
    live = [p for p in pids if _alive(p) and _ours(p, tag, programs)]
    for p in live:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(_alive(p) for p in live):
        time.sleep(0.02)
    for p in live:
        if _alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        removed.append(f"process {p}")


def stop_tagged(tag: str, programs: Collection[str]) -> list[str]:
    """Stop every process of ``programs`` whose command line holds ``tag``
    (SIGTERM, SIGKILL 2 s later); one line per process stopped."""
    removed: list[str] = []
    _stop(_tagged_pids(tag, programs), removed, tag, programs)
    return removed


def tagged_links(tag: str) -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(": ")
        if len(parts) > 1:
            name = parts[1].split("@", 1)[0]
            if name.startswith(tag):
                names.append(name)
    return names


def clean_run(tag: str, pids: list[int] | None = None) -> list[str]:
    """Remove every process and interface of run ``tag``; returns what went."""
    removed: list[str] = []
    _stop(sorted(set((pids or []) + _tagged_pids(tag))), removed, tag)
    for name in tagged_links(tag):
        r = subprocess.run(["ip", "link", "del", name], capture_output=True, text=True)
        if r.returncode == 0:
            removed.append(f"link {name}")
    folder = STATE_ROOT / tag
    if statedir.remove(folder):   # whole: never under its tag without its record
        removed.append(f"state {folder}")
    return removed


def clean(force: bool = False) -> list[str]:
    """Remove what crashed runs left: processes, interfaces, state folders.

    Runs whose owner is still alive are left alone unless ``force``.
    Returns one line per removed item (empty when there was nothing)."""
    removed: list[str] = []
    if not STATE_ROOT.is_dir():
        return removed
    removed += statedir.remove_debris(STATE_ROOT)
    for folder in sorted(STATE_ROOT.iterdir()):
        if not folder.is_dir() or not folder.name.startswith(TAG_PREFIX):
            continue
        try:
            state = json.loads((folder / "state.json").read_text())
        except (OSError, json.JSONDecodeError):
            state = {"owner": -1, "pids": []}
        owner = int(state.get("owner", -1))
        start = state.get("owner_start")
        # a live owner's runs are left alone - this process' own included: a
        # run may hold two racks at once (e.g. the SLO's hash reference while
        # the protocol's rack is up), each cleans its own on close
        if not force and owner > 0 and (owner == os.getpid() or _alive(owner, start)):
            continue
        removed += clean_run(folder.name, [int(p) for p in state.get("pids", [])])
    return removed


def clean_children(wait_s: float = 5.0) -> tuple[list[str], list[str]]:
    """Remove the runs of this process's children (``parent`` in their
    state) once their owners are gone: a sweep's joblib workers, which
    joblib kills mid-teardown when the sweep stops. Waits up to ``wait_s``
    for the owners to exit, so no teardown still runs beside the removal;
    returns what went and the tags of the runs whose owner still runs at the
    deadline (left alone: not a worker joblib killed, so not ours to stop)."""
    me = procstat.owner_record()
    runs: list[tuple[str, list[int], int, int | None]] = []
    try:   # a sim sweep, not root: no such folder, or not ours to read
        folders = sorted(STATE_ROOT.iterdir())
    except OSError:
        folders = []
    for folder in folders:
        try:
            state = json.loads((folder / "state.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue   # not a run's: never ours
        if state.get("parent") == me and folder.name.startswith(TAG_PREFIX):
            runs.append((folder.name, [int(p) for p in state.get("pids", [])],
                         int(state.get("owner", -1)), state.get("owner_start")))
    # and those of the debris: a worker killed while making or removing its
    # folder (netkv.statedir) may still be exiting
    procstat.wait_exited([_record(o, s) for _, _, o, s in runs]
                         + statedir.makers(STATE_ROOT), wait_s)
    removed: list[str] = statedir.remove_debris(STATE_ROOT)
    left: list[str] = []
    for tag, pids, owner, start in runs:
        if _alive(owner, start):
            left.append(tag)
        else:
            removed += clean_run(tag, pids)
    return removed, left
