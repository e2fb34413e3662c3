"""``netkv clean --inventory NAME``: what a crashed testbed run left on its hosts.

A run keeps a local folder (``STATE_ROOT/<tag>``, with its owner's pid and start time)
while it lives and a run folder ``<workdir>/run-<tag>`` on every host it
uses, with the pid of each program it started. A remote run folder whose
local folder is gone, or whose owner is gone, belongs to a run that died
without cleaning up: its programs (only those still carrying the tag: a pid
may have been reused) are killed and the folder removed; then the local
folder, after the SSH processes naming it (its multiplexed masters, which
ControlPersist keeps 120 s, and its socket forwards).

A sweep's joblib workers record the command as their runs' ``parent``, with
the inventory: ``clean_children`` removes, on the command's way out, the
runs of the workers joblib killed mid-teardown (``netkv.interrupts``).
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections import defaultdict
from collections.abc import Collection
from pathlib import Path

from netkv import procstat, statedir
from netkv.mininet.cleanup import stop_tagged
from netkv.testbed.inventory import Inventory
from netkv.testbed.ssh import RemoteError, Ssh

# A run's local folders, here (STATE_ROOT/<tag>): netkv.targets.testbed writes them
STATE_ROOT = Path(os.environ.get("NETKV_TESTBED_STATE", "/run/netkv/testbed"))

# what a run's local folder records besides its ``owner``: the owner's parent
# (a sweep's command, for a joblib worker) and the inventory its hosts are in
PARENT, INVENTORY = "parent", "inventory.json"
# the local processes of a run: ssh (forwards) and its multiplexed masters,
# whose command line is "ssh: <control path> [mux]"
SSH_PROGRAMS = ("ssh", "ssh:")


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


def clean_inventory(inv: Inventory, state_root: Path, force: bool = False,
                    tags: Collection[str] | None = None) -> list[str]:
    """Remove the dead runs (every run with ``force``) on ``inv``'s hosts and
    here: only those of ``tags`` when given."""
    def dead(tag: str) -> bool:
        return (tags is None or tag in tags) and (force or not alive(state_root, tag))

    removed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="nkclean", dir="/tmp") as control:
        for host in inv.hosts:
            # a host that fails part-way (unreachable, a command timing out)
            # is skipped: the other hosts and the local folders still go
            ssh = Ssh(host, inv.known_hosts, Path(control))
            try:
                ssh.check()
                found = ssh.run(f"ls -d {shlex.quote(host.workdir)}/run-* 2>/dev/null || true")
                for folder in found.stdout.split():
                    tag = folder.rsplit("/run-", 1)[-1]
                    if dead(tag):
                        ssh.run(kill_and_remove(folder, tag), check=False)
                        removed.append(f"{host.name}:{folder}")
            except RemoteError as exc:
                removed.append(f"skipped {exc}")
            finally:
                ssh.close()
    for folder in state_root.glob("nk*") if state_root.exists() else []:
        if dead(folder.name):
            # its SSH masters and forwards (their command lines name the folder)
            removed += stop_tagged(f"{folder}/", SSH_PROGRAMS)
            statedir.remove(folder)
    if tags is None:   # a run killed while making or removing its folder
        removed += _remove_debris(state_root)
    return removed


def _remove_debris(state_root: Path) -> list[str]:
    """netkv.statedir's debris of dead processes, after the SSH processes
    naming a removed run's folder (its masters' ControlPath is in it)."""
    return statedir.remove_debris(
        state_root, before=lambda tag: stop_tagged(f"{state_root / tag}/", SSH_PROGRAMS))


def clean_children(state_root: Path, wait_s: float = 5.0) -> tuple[list[str], list[str]]:
    """Remove the runs of this process's children (``parent`` in their local
    folder) once their owners are gone: a sweep's joblib workers, which joblib
    kills mid-teardown when the sweep stops. Waits up to ``wait_s`` for the
    owners to exit; returns what went and the tags of the runs whose owner
    still runs at the deadline (left alone), as netkv.mininet.cleanup's."""
    me = procstat.owner_record()
    runs: dict[str, str] = {}   # tag -> its owner's record
    by_inventory: dict[str, list[str]] = defaultdict(list)   # inventory JSON -> tags
    for folder in sorted(state_root.glob("nk*")) if state_root.is_dir() else []:
        try:
            if (folder / PARENT).read_text().strip() != me:
                continue   # another command's run, or one still being created
            owner, inv = (folder / "owner").read_text().strip(), (folder / INVENTORY).read_text()
        except OSError:
            continue
        runs[folder.name] = owner
        by_inventory[inv].append(folder.name)
    # and those of the debris: a worker killed while making or removing its
    # folder (netkv.statedir) may still be exiting
    procstat.wait_exited([*runs.values(), *statedir.makers(state_root)], wait_s)
    left = [tag for tag in runs if alive(state_root, tag)]
    removed: list[str] = _remove_debris(state_root)
    for text, tags in by_inventory.items():
        removed += clean_inventory(Inventory.model_validate_json(text), state_root, tags=tags)
    return removed, left
