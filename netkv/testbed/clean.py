"""``netkv clean --inventory NAME``: what a crashed testbed run left on its hosts.

A run keeps a local folder (``STATE_ROOT/<tag>``, with its owner's pid and start time)
while it lives and a run folder ``<workdir>/run-<tag>`` on every host it
uses, with the pid of each program it started. A remote run folder whose
local folder is gone, or whose owner is gone, belongs to a run that died
without cleaning up: its programs (only those still carrying the tag: a pid
may have been reused) are killed and the folder removed.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path

from netkv import procstat
from netkv.testbed.inventory import Inventory
from netkv.testbed.ssh import RemoteError, Ssh


def alive(state_root: Path, tag: str) -> bool:
    """The run ``tag`` is still running here."""
    try:
        return procstat.owner_running((state_root / tag / "owner").read_text())
    except (OSError, ValueError):
        return False


def program_names() -> tuple[str, ...]:
    """Every program a testbed run starts on a host: netkv's own and each
    switch back-end's (``netkv.backends.BACKENDS``)."""
    from netkv.backends import programs
    from netkv.testbed.stacks import DPDK_PROGRAMS, PROGRAMS

    return tuple(dict.fromkeys((*PROGRAMS, *DPDK_PROGRAMS, *programs())))


def kill_and_remove(folder: str, tag: str) -> str:
    """The remote command that stops run ``tag``'s programs and removes its
    run folder: the pids it recorded (if still carrying the tag: a pid may
    have been reused), then any process of a known program name whose
    command line names the folder (one whose pid file was never written,
    e.g. a switch started by a lifeline that died at once). A script's name
    (run_switchd.sh) is its interpreter's first argument: both words count."""
    q, t = shlex.quote(folder), shlex.quote(tag)
    names = "|".join(program_names())
    return (f"for f in {q}/*.pid; do [ -f \"$f\" ] || continue; p=$(cat \"$f\"); "
            f"grep -qa -- {t} /proc/$p/cmdline 2>/dev/null && kill -9 $p; done; "
            f"for p in $(pgrep -f -- {q}/ 2>/dev/null); do "
            f"for n in $(tr '\\0' '\\n' < /proc/$p/cmdline 2>/dev/null | head -n2); do "
            f"case \"${{n##*/}}\" in {names}) kill -9 $p;; esac; done; done; rm -rf {q}")


def clean_inventory(inv: Inventory, state_root: Path, force: bool = False) -> list[str]:
    removed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="nkclean", dir="/tmp") as control:
        for host in inv.hosts:
            ssh = Ssh(host, inv.known_hosts, Path(control))
            try:
                ssh.check()
                found = ssh.run(f"ls -d {shlex.quote(host.workdir)}/run-* 2>/dev/null || true")
            except RemoteError as exc:
                removed.append(f"skipped {exc}")
                continue
            for folder in found.stdout.split():
                tag = folder.rsplit("/run-", 1)[-1]
                if not force and alive(state_root, tag):
                    continue  # a live run's
                ssh.run(kill_and_remove(folder, tag), check=False)
                removed.append(f"{host.name}:{folder}")
            ssh.close()
    for folder in state_root.glob("nk*") if state_root.exists() else []:
        if force or not alive(state_root, folder.name):
            shutil.rmtree(folder, ignore_errors=True)
    return removed
